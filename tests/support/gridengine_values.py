"""Generated Grid Engine attribute values, shared by the misfit oracle
(tests/matching/gridengine/test_sql_matches_evaluator.py) and the tests that check the
engine's fast paths against the same clusters (test_fast_paths.py, test_pull.py).

The architecture strings include mixed case and a glob metacharacter (``[linux``) so that
the wildcard patterns below are exercised on awkward values as well as on plain ones.
"""

from __future__ import annotations

import random

from sqlalchemy.orm import Session

from app.db.models import Worker
from app.matching.gridengine.admin import set_values
from app.matching.gridengine.table import create_attribute, definition_from_body
from app.matching.gridengine.values import Target
from app.matching.workers import WorkerSpec, upsert_worker
from app.wire.queues import QueueSpec

ARCHES = ["lx-amd64", "lx-ia64", "sol-sparc64", "LX-AMD64", "darwin", "[linux"]
PATTERNS = [
    "lx*",
    "lx*&!*ia64",
    "sol*|darwin",
    "[ls]*64",
    "!lx*",
    "[linux|x]",
    "*-amd64",
    "lx-amd64",
]


def define_attributes(session: Session) -> None:
    """The attributes the generated clusters use: one per relop and type, a consumable with
    a default and a FORCED one."""
    for row in (
        {"name": "os", "shortcut": "os", "type": "CSTRING", "relop": "==", "default": "NONE"},
        {"name": "rank_le", "shortcut": "rle", "type": "INT", "relop": "<=", "default": "0"},
        {"name": "rank_gt", "shortcut": "rgt", "type": "DOUBLE", "relop": ">", "default": "0"},
        {"name": "rank_ne", "shortcut": "rne", "type": "INT", "relop": "!=", "default": "0"},
        {
            "name": "lic",
            "shortcut": "lic",
            "type": "INT",
            "relop": "<=",
            "consumable": "YES",
            "default": "1",
        },
        {
            "name": "key",
            "shortcut": "key",
            "type": "INT",
            "relop": "<=",
            "requestable": "FORCED",
            "default": "0",
        },
    ):
        create_attribute(
            session,
            definition_from_body({"requestable": "YES", "consumable": "NO", "urgency": 0, **row}),
        )


def give_random_values(session: Session, rng: random.Random, worker: Worker) -> None:
    """Host load and fixed values, and some queue-instance values, drawn from ``rng`` (the
    same draws in the same order for every caller, so each test's cluster stays fixed)."""
    host = Target("host", worker.id)
    set_values(session, host, "load_values", {"arch": rng.choice(ARCHES)})
    values = {"os": rng.choice(["Linux", "linux", "BSD"])}
    if rng.random() < 0.7:
        values["rank_le"] = str(rng.randint(1, 5))
    if rng.random() < 0.3:
        values["lic"] = str(rng.randint(0, 2))
    if rng.random() < 0.2:
        values["key"] = "1"
    set_values(session, host, "complex_values", values)
    for qi in worker.queue_instances:
        if rng.random() < 0.5:
            set_values(
                session,
                Target("queue_instance", worker.id, qi.id),
                "complex_values",
                {"rank_ne": str(rng.randint(1, 3)), "rank_le": str(rng.randint(1, 5))},
            )


def random_requests(rng: random.Random) -> str:
    """A hard request list over the attributes of define_attributes, drawn from ``rng``."""
    items = [f"arch={rng.choice(PATTERNS)}"]
    for name, choices in (
        ("os", ["LINUX", "bsd", "l*"]),
        ("rle", ["1", "3", "6"]),
        ("rgt", ["0.25", "1"]),
        ("rne", ["1", "2"]),
        ("lic", ["0", "1", "3"]),
        ("key", ["1"]),
    ):
        if rng.random() < 0.4:
            items.append(f"{name}={rng.choice(choices)}")
    return ",".join(items)


def evaluator_cluster(session: Session, rng: random.Random) -> list[Worker]:
    """Six workers with two queues each and random values, and global values, for the tests
    that compare the engine's cluster state with the reference evaluator."""
    define_attributes(session)
    set_values(session, Target("global"), "complex_values", {"rank_gt": "0.5", "lic": "9"})
    workers = []
    for index in range(6):
        worker, _ = upsert_worker(
            session,
            WorkerSpec(
                name=f"h{index}",
                queues=tuple(QueueSpec(f"q{n}", rng.randint(1, 3)) for n in range(2)),
            ),
        )
        give_random_values(session, rng, worker)
        workers.append(worker)
    session.flush()
    return workers
