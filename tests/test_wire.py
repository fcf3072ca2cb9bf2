"""app.wire is shared by the client, the agent and the server, so it must import with any of
them alone: only the standard library, checked on the source itself (import-linter forbids
the rest of app, this forbids every third-party package)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import app.wire
from app.client import models as client_models
from app.db import models as db_models
from app.wire import states

WIRE = Path(app.wire.__file__).parent


def imported_roots(path: Path) -> set[str]:
    """The top-level names of every module a source file imports."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_wire_package_imports_only_the_standard_library() -> None:
    sources = sorted(WIRE.glob("*.py"))
    assert [path.name for path in sources] == ["__init__.py", "states.py"]
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    outside = {path.name: imported_roots(path) - allowed for path in sources}
    assert outside == {"__init__.py": set(), "states.py": set()}


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
