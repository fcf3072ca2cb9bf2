"""The replay of recorded Grid Engine answers without a Grid Engine
(conformance/gridengine/replay.py): agreement, a difference, and documenting it with
``--mark`` so that the suite holds jobmatch to its documented answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.gridengine import replay

#: Son of Grid Engine 8.1.9's answer to one 3-slot queue and four jobs (recorded as
#: tests/vectors/sge/gridengine-8.1.9/basics.jsonl B01): three run, the fourth waits.
PLACED = {"submit": "accepted", "assignment": {"all.q@h1": 1}, "master_queue": "all.q@h1"}
WAITING = {"submit": "accepted", "assignment": None, "master_queue": None}


def _vector(answer: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "T01",
        "title": "one queue of 3 slots, four jobs",
        "cluster": {"queues": [{"name": "all.q@h1", "host": "h1", "slots": 3, "seq_no": 0}]},
        "jobs": [{}, {}, {}, {}],
        "gridengine": {"version": "8.1.9+dfsg-10+b1", "answer": {"jobs": answer}},
    }


def _write(tmp_path: Path, vector: dict[str, Any]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(vector) + "\n", "utf-8")
    return path


def test_an_agreeing_vector_counts_as_agreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, _vector([PLACED, PLACED, PLACED, WAITING]))
    assert replay.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "T01: agree" in out
    summary = "1/1 agree; 0 documented divergences, 0 differ, 0 failed in jobmatch"
    assert out.rstrip().endswith(summary)


def test_a_difference_is_shown_then_documented_by_mark_and_taken_back_by_unmark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A made-up Grid Engine answer that runs all four: jobmatch (rightly) differs.
    path = _write(tmp_path, _vector([PLACED, PLACED, PLACED, PLACED]))
    assert replay.main([str(tmp_path)]) == 0
    assert "T01: DIFFER" in capsys.readouterr().out

    assert replay.main([str(tmp_path), "--mark", "T01=divergences-from-grid-engine"]) == 0
    assert "T01: documented divergence (divergences-from-grid-engine)" in capsys.readouterr().out
    stored = json.loads(path.read_text("utf-8"))
    assert stored["divergence"] == "divergences-from-grid-engine"
    assert stored["jobmatch_answer"] == {"jobs": [PLACED, PLACED, PLACED, WAITING]}

    assert replay.main([str(tmp_path), "--unmark", "T01"]) == 0
    assert "T01: DIFFER" in capsys.readouterr().out
    assert "divergence" not in json.loads(path.read_text("utf-8"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mark", "T01"], "expected ID=ANCHOR"),
        (["--mark", "T99=x"], "no recorded vector has the id 'T99'"),
    ],
)
def test_a_bad_mark_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    _write(tmp_path, _vector([PLACED, PLACED, PLACED, WAITING]))
    assert replay.main([str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
