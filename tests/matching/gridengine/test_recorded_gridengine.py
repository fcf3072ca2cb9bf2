"""The vectors recorded from the real Son of Grid Engine 8.1.9 (Debian 8.1.9+dfsg-10+b1) by
``python -m conformance.gridengine --record tests/vectors/sge/gridengine-8.1.9`` replayed
against jobmatch on SQLite and PostgreSQL: per job, ``submit``, ``assignment`` and
``master_queue`` must equal Grid Engine's recorded answer. A vector with ``divergence``
(an anchor of docs/notations/gridengine.md) is a documented departure: jobmatch must give
its ``jobmatch_answer`` instead, and that answer must still differ from Grid Engine's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.db.engine import Database
from app.matching.scenarios.run import check_case, run_case
from tests.vectors import SGE

pytestmark = pytest.mark.db

RECORDED = SGE / "gridengine-8.1.9"
DOC = Path(__file__).resolve().parents[3] / "docs" / "notations" / "gridengine.md"
COMPARED = ("submit", "assignment", "master_queue")


def _vectors() -> list[dict[str, Any]]:
    out = []
    for path in sorted(RECORDED.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                vector = json.loads(line)
                vector["_file"] = path.name
                out.append(vector)
    return out


VECTORS = _vectors()


def _compared(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: job.get(key) for key in COMPARED} for job in jobs]


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors of a Markdown text (lower case, punctuation dropped,
    spaces to hyphens)."""
    anchors = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return anchors


def test_the_recorded_vectors_are_there_with_their_provenance() -> None:
    assert len(VECTORS) >= 15
    ids = [v["id"] for v in VECTORS]
    assert len(ids) == len(set(ids))
    for vector in VECTORS:
        recorded = vector["gridengine"]
        assert recorded["version"].startswith("8.1.9"), vector["id"]
        assert recorded["scheduler"]["queue_sort_method"] in ("seqno", "load"), vector["id"]
        assert recorded["scheduler"]["weight_urgency"].startswith("0"), vector["id"]
        jobs = vector["jobs"] if "jobs" in vector else [vector["job"]]
        assert len(recorded["answer"]["jobs"]) == len(jobs), vector["id"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['_file']}:{v['id']}")
def test_jobmatch_answers_as_the_recorded_grid_engine(
    database: Database, vector: dict[str, Any]
) -> None:
    check_case(vector)
    outcome = run_case(database, vector)
    jobs = outcome["jobs"] if "jobs" in vector else [outcome]
    recorded = _compared(vector["gridengine"]["answer"]["jobs"])
    documented = "divergence" in vector
    expected = _compared(vector["jobmatch_answer"]["jobs"]) if documented else recorded
    assert _compared(jobs) == expected, json.dumps(
        {"jobmatch": _compared(jobs), "gridengine": recorded}, indent=1
    )


def test_every_documented_divergence_still_differs_and_is_documented() -> None:
    """A vector marked as a divergence keeps jobmatch's documented answer apart from Grid
    Engine's and names a heading of docs/notations/gridengine.md."""
    anchors = _anchors(DOC.read_text(encoding="utf-8")) if DOC.exists() else set()
    for vector in (v for v in VECTORS if "divergence" in v):
        documented = _compared(vector["jobmatch_answer"]["jobs"])
        assert documented != _compared(vector["gridengine"]["answer"]["jobs"]), vector["id"]
        assert vector["divergence"] in anchors, (vector["id"], vector["divergence"])
