"""app.wire is shared by the client, the agent and the server, so it must import with any of
them alone: only the standard library, checked on the source itself (import-linter forbids
the rest of app, this forbids every third-party package)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import app.wire
from app.client import models as client_models
from app.client import requests as client_requests
from app.client import submitter as client_submitter
from app.db import models as db_models
from app.matching import category_fit, readiness
from app.matching import workers as server_workers
from app.matching.gridengine import values as gridengine_values
from app.matching.whatif import run as whatif_run
from app.wire import categories, explanation, queues, states, values, whatif

WIRE = Path(app.wire.__file__).parent


def imported_roots(path: Path) -> set[str]:
    """The top-level names of every module a source file imports, but for app.wire's own
    modules (one wire module may use another's enumerations)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and not node.level
            and not node.module.startswith("app.wire.")
        ):
            roots.add(node.module.split(".")[0])
    return roots


def test_the_wire_package_imports_only_the_standard_library() -> None:
    sources = sorted(WIRE.glob("*.py"))
    assert [path.name for path in sources] == [
        "__init__.py",
        "categories.py",
        "demand.py",
        "demand_scale.py",
        "explanation.py",
        "ordering.py",
        "queues.py",
        "states.py",
        "values.py",
        "whatif.py",
    ]
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    outside = {path.name: imported_roots(path) - allowed for path in sources}
    assert outside == {path.name: set() for path in sources}


def test_client_and_server_use_the_same_enumerations() -> None:
    """One definition: the client's models and the server's columns name the same classes,
    so a value added to one cannot be missing from the other."""
    for name in ("Role", "WorkerState", "JobState", "JobEventKind"):
        shared = getattr(states, name)
        assert getattr(client_models, name) is shared
        assert getattr(db_models, name) is shared
    assert [state.value for state in states.JobState] == [
        "waiting",
        "running",
        "finished",
        "failed",
        "cancelled",
    ]


def test_client_and_server_build_the_same_answer_parts() -> None:
    """One definition: the server builds these answer parts and the client parses into the
    very same classes, so a field added to one cannot be missing from the other (the
    client reaches ``Clause`` and ``Consumption`` through the classes that hold them)."""
    shared = {
        whatif_run: (whatif, ("AddedJob", "CategoryCounts", "FirstPull")),
        category_fit: (categories, ("CategoryRequest", "WorkerFit")),
        readiness: (explanation, ("WorkerExplanation", "ExplainSummary")),
    }
    for server_module, (wire_module, names) in shared.items():
        for name in names:
            assert getattr(client_models, name) is getattr(wire_module, name)
            assert getattr(server_module, name) is getattr(wire_module, name)
    assert readiness.Clause is explanation.Clause
    assert client_submitter.Values is gridengine_values.Values is values.Values
    assert gridengine_values.Consumption is values.Consumption
    assert client_requests.QueueSpec is server_workers.QueueSpec is queues.QueueSpec
    assert client_models.QueueSlots is server_workers.QueueSlots is queues.QueueSlots
