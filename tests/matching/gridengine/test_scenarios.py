"""The Grid Engine scenarios (tests/scenarios/sge/*.jsonl, model sge62u5-reference-v1)
run through the engine: each case's outcome must equal its ``expected``, and the SQL misfit
cache must never rule out a queue instance the reference evaluator lets the job use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.matching.scenarios.run import read_scenarios, run_file

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "sge"
FILES = sorted(SCENARIOS.glob("*.jsonl"))


def test_there_are_enough_scenarios_including_the_seed_examples() -> None:
    ids = [case["id"] for path in FILES for case in read_scenarios(path)]
    assert len(ids) >= 25
    assert {"E1", "E2"} <= set(ids)
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_case_matches_its_expected(path: Path) -> None:
    results = run_file(path)
    differing = {r.id: r.outcome for r in results if not r.matched}
    assert not differing, json.dumps(differing, indent=1, sort_keys=True)


def test_seed_e2_books_as_the_research_note_corrects_it() -> None:
    """Example E2 of the 2003 Complex Attribute Specification, its table corrected: q2 ends
    with 3 slots and t02 0, q3 with 0 and 20, q4 2 and 20."""
    (result,) = [r for r in run_file(SCENARIOS / "seed.jsonl") if r.id == "E2"]
    assert result.outcome["assignment"] == {"q2@h2": 2, "q3@h3": 1, "q4@h4": 1}
    assert result.outcome["remaining"]["queues"] == {
        "q2@h2": {"slots": 3, "t02": 0},
        "q3@h3": {"slots": 0, "t02": 20},
        "q4@h4": {"slots": 2, "t02": 20},
    }


def test_cli_json_writes_one_object_per_case() -> None:
    result = CliRunner().invoke(cli, ["scenario", "run", "--json", str(SCENARIOS / "seed.jsonl")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [line["id"] for line in lines] == ["E1", "E2"]
    assert lines[0]["outcome"]["assignment"] == {"q1@h1": 4}


def test_cli_summary_and_exit_code_on_a_differing_case(tmp_path: Path) -> None:
    case = json.loads((SCENARIOS / "seed.jsonl").read_text().splitlines()[0])
    case["expected"]["assignment"] = {"q1@h1": 5}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(case) + "\n")
    result = CliRunner().invoke(cli, ["scenario", "run", str(bad)])
    assert result.exit_code == 1
    assert "DIFFERS" in result.output
    assert "scenarios: 0 matched, 1 differ, 1 run" in result.output
