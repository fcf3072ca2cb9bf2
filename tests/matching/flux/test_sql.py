"""RFC 31 constraints in SQL equal the pure-Python evaluator (app.notations.flux.constraints),
on generated constraints and clusters, on both databases."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import ConstraintHostRun, ConstraintRankRun, Worker
from app.matching import candidates, submission, workers
from app.matching.flux.sql import compile_constraint
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from app.notations.flux.constraints import Target, matches, parse_constraint

PROPERTIES = ["ssd", "gpu", "big", "node03"]
NAMES = ["node00", "node01", "node3", "node03", "node10", "node100", "login", "gpu", "n0a7"]


def random_leaf(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["properties", "hostlist", "ranks"])
    if kind == "properties":
        names = rng.sample(PROPERTIES, rng.randint(0, 3))
        return {"properties": [("^" if rng.random() < 0.3 else "") + n for n in names]}
    if kind == "hostlist":
        pool = [
            "node[00-03]",
            "node[1-3]",
            "node[3,10-100]",
            "node03",
            "login",
            "n[0-1]a7",
            "node[000-100]",
            "gpu",
        ]
        return {"hostlist": rng.sample(pool, rng.randint(0, 2))}
    pool = ["0-3", "2", "5-9", "7,11"]
    return {"ranks": rng.sample(pool, rng.randint(0, 2))}


def random_constraint(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    if depth >= 3 or rng.random() < 0.4:
        return random_leaf(rng)
    op = rng.choice(["and", "or", "not"])
    terms = [random_constraint(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if op == "not":
        return {"not": terms[:1]} if rng.random() < 0.8 else {"not": terms}
    return {op: terms}


def cluster(rng: random.Random) -> list[WorkerSpec]:
    specs = []
    for index, name in enumerate(NAMES):
        rank = index if rng.random() < 0.8 else None
        props = tuple(sorted(rng.sample(PROPERTIES[:3], rng.randint(0, 3))))
        specs.append(WorkerSpec(name=name, rank=rank, properties=props))
    return specs


def python_fits(constraint: dict[str, Any], specs: list[WorkerSpec]) -> set[str]:
    tree = parse_constraint(constraint)
    return {
        s.name
        for s in specs
        if matches(tree, Target(hostname=s.name, rank=s.rank, properties=frozenset(s.properties)))
    }


@pytest.mark.parametrize("seed", range(4))
def test_sql_equals_python_for_new_categories(database: Database, seed: int) -> None:
    rng = random.Random(seed)
    specs = cluster(rng)
    with database.transaction() as session:
        for spec in specs:
            workers.upsert_worker(session, spec)
        for _ in range(40):
            constraint = random_constraint(rng)
            job = submission.submit_job(session, JobSpec(constraint=constraint), submitter="t")
            got = {c.worker for c in candidates.job_candidates(session, job)}
            assert got == python_fits(constraint, specs), constraint
            assert (job.state.value == "failed") == (not got)


@pytest.mark.parametrize("seed", range(3))
def test_sql_equals_python_after_worker_changes(database: Database, seed: int) -> None:
    """The changed-worker path recompiles every constrained category (in chunks)."""
    rng = random.Random(1000 + seed)
    specs = cluster(rng)
    constraints = [random_constraint(rng) for _ in range(60)]
    with database.transaction() as session:
        for spec in specs:
            workers.upsert_worker(session, spec)
        jobs = [
            submission.submit_job(session, JobSpec(constraint=c), submitter="t")
            for c in constraints
        ]
        changed = cluster(rng)  # new ranks and properties for the same names
        for spec in changed:
            workers.upsert_worker(session, spec)
        for constraint, job in zip(constraints, jobs, strict=True):
            got = {c.worker for c in candidates.job_candidates(session, job)}
            assert got == python_fits(constraint, changed), constraint


def test_explanations_name_the_failing_constraint_parts(database: Database) -> None:
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="node07", rank=7, properties=("gpu",)))
        job = submission.submit_job(
            session,
            JobSpec(
                constraint={
                    "and": [
                        {"properties": ["ssd", "^gpu"]},
                        {"hostlist": ["node[0-3]"]},
                        {"ranks": ["0-3"]},
                    ]
                }
            ),
            submitter="t",
        )
        (explanation,) = candidates.explain_job(session, job)
        assert explanation.misfit_reason == "constraint"
        assert [c.message for c in explanation.clauses] == [
            "constraint: the worker lacks property 'ssd'",
            "constraint: the worker has property 'gpu', which the job forbids (^gpu)",
            "constraint: the worker's name 'node07' is not in hostlist node[0-3]",
            "constraint: the worker's rank 7 is not in ranks 0-3",
        ]


def test_hostlists_and_idsets_of_100000_are_runs_not_parameters(database: Database) -> None:
    """Issue 5: 100,000 names or ranks without one SQL parameter per name."""
    big_hosts = {"hostlist": ["node[000000-099999]"]}
    big_ranks = {"ranks": ["0-99999"]}
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="node012345", rank=99_999))
        workers.upsert_worker(session, WorkerSpec(name="node12345", rank=100_000))
        workers.upsert_worker(session, WorkerSpec(name="node100000"))
        hosts_job = submission.submit_job(session, JobSpec(constraint=big_hosts), submitter="t")
        ranks_job = submission.submit_job(session, JobSpec(constraint=big_ranks), submitter="t")
        assert {c.worker for c in candidates.job_candidates(session, hosts_job)} == {"node012345"}
        assert {c.worker for c in candidates.job_candidates(session, ranks_job)} == {"node012345"}
        assert session.scalar(select(func.count()).select_from(ConstraintHostRun)) == 1
        assert session.scalar(select(func.count()).select_from(ConstraintRankRun)) == 1
        predicate = compile_constraint(parse_constraint(big_hosts), hosts_job.category_id, Worker)
        compiled = select(Worker.id).where(predicate).compile()
        assert len(compiled.params) < 10


def test_requires_text_compiles_like_flux(database: Database) -> None:
    """RFC 35 --requires: bare words are properties, host: takes a hostlist, rank: an idset."""
    with database.transaction() as session:
        workers.upsert_worker(session, WorkerSpec(name="node1", rank=1, properties=("ssd",)))
        workers.upsert_worker(session, WorkerSpec(name="node2", rank=2))
        job = submission.submit_job(session, JobSpec(requires="host:node[1-2] ssd"), submitter="t")
        assert {c.worker for c in candidates.job_candidates(session, job)} == {"node1"}
        same = submission.submit_job(
            session,
            JobSpec(constraint={"and": [{"hostlist": ["node[1-2]"]}, {"properties": ["ssd"]}]}),
            submitter="t",
        )
        assert same.category_id == job.category_id
        assert job.constraint == "host:node[1-2] ssd" and job.constraint_syntax == "rfc35"
