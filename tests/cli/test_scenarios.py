"""`jobmatch scenario run` (issue 21): `--json` marks each case matched or not, with what
differs, exits 1 when any differs, and says its progress on stderr only."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.cli.errors import ExitCode
from app.matching.scenarios.compare import differences

SEED = Path(__file__).resolve().parents[1] / "scenarios" / "sge" / "seed.jsonl"


def differing_copy(tmp_path: Path) -> Path:
    """The seed file with case E1 expecting 5 slots on q1@h1 instead of the 4 it gets."""
    cases = [json.loads(line) for line in SEED.read_text().splitlines() if line.strip()]
    cases[0]["expected"]["assignment"] = {"q1@h1": 5}
    path = tmp_path / "differs.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return path


def test_json_marks_each_case_and_names_the_differences(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["scenario", "run", "--json", str(differing_copy(tmp_path))])
    assert result.exit_code == ExitCode.REFUSED
    e1, e2 = (json.loads(line) for line in result.output.splitlines())
    assert e1["id"] == "E1" and e1["matched"] is False
    assert e1["differences"] == [
        {"path": ".assignment.q1@h1", "expected": 5, "actual": 4},
    ]
    assert e2["id"] == "E2" and e2["matched"] is True and e2["differences"] == []
    assert e2["outcome"]["assignment"] == {"q2@h2": 2, "q3@h3": 1, "q4@h4": 1}


def test_every_seed_case_matches_and_the_exit_code_is_zero() -> None:
    result = CliRunner().invoke(cli, ["scenario", "run", "--json", str(SEED)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["id"], r["matched"], r["differences"]) for r in records] == [
        ("E1", True, []),
        ("E2", True, []),
    ]


def test_the_summary_shows_where_a_case_differs(tmp_path: Path) -> None:
    path = differing_copy(tmp_path)
    result = CliRunner().invoke(cli, ["scenario", "run", str(path)])
    assert result.exit_code == ExitCode.REFUSED
    # One line for the file, then only the case that differs, and where (issue 39).
    lines = result.output.splitlines()
    assert lines[0] == f"{path}: 2 cases, 1 agree, 1 differ"
    assert lines[1].startswith("E1: ") and lines[1].endswith("[DIFFERS]")
    assert lines[2:] == [
        "  differs at .assignment.q1@h1: expected 5, got 4",
        "scenarios: 1 matched, 1 differ, 2 run",
    ]


def test_cases_that_agree_are_one_line_per_file_unless_verbose() -> None:
    """Issue 39: every case's outcome JSON was printed, even when it matched."""
    quiet = CliRunner().invoke(cli, ["scenario", "run", str(SEED), str(SEED)])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.output.splitlines() == [
        f"{SEED}: 2 cases, 2 agree",
        f"{SEED}: 2 cases, 2 agree",
        "scenarios: 4 matched, 0 differ, 4 run",
    ]
    verbose = CliRunner().invoke(cli, ["scenario", "run", "--verbose", str(SEED)])
    assert verbose.exit_code == 0, verbose.output
    lines = verbose.output.splitlines()
    assert lines[0] == f"{SEED}: 2 cases, 2 agree"
    assert lines[1].startswith("E1: ") and lines[1].endswith("[matches]")
    assert json.loads(lines[2])["assignment"] == {"q1@h1": 4}
    assert lines[3].startswith("E2: ") and lines[3].endswith("[matches]")
    assert json.loads(lines[4])["assignment"] == {"q2@h2": 2, "q3@h3": 1, "q4@h4": 1}
    assert lines[5:] == ["scenarios: 2 matched, 0 differ, 2 run"]


def test_progress_goes_to_stderr_and_json_to_stdout() -> None:
    command = ["scenario", "run", "--json", "--progress", str(SEED), str(SEED)]
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"[1/2] {SEED}: running 2 cases...",
        f"[2/2] {SEED}: running 2 cases...",
    ]
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == [
        "E1",
        "E2",
        "E1",
        "E2",
    ]


def test_an_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["scenario", "run", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == ExitCode.USAGE
    assert result.output.startswith("error: ") and "missing.jsonl" in result.output


def test_differences_compare_as_the_runner_does() -> None:
    """Only the keys expected names, messages ignored, numbers within 1e-6 (the rules of
    app.matching.scenarios.compare)."""
    expected = {"a": 1.0, "message": "x", "b": [1, {"c": "y"}]}
    actual = {"a": 1.0000001, "message": "other", "b": [1, {"c": "z"}], "extra": 3}
    assert differences(expected, actual) == [{"path": ".b[1].c", "expected": "y", "actual": "z"}]
    assert differences({"a": [1, 2]}, {"a": [1]}) == [
        {"path": ".a", "expected": [1, 2], "actual": [1]}
    ]
    assert differences({"gone": 1}, {}) == [{"path": ".gone", "expected": 1, "actual": None}]


SCENARIOS = SEED.parents[1]
FAMILY_FILES = {
    "momotor": SCENARIOS / "momotor" / "tags.jsonl",
    "flux": SCENARIOS / "flux" / "constraints_and_allocations.jsonl",
    "debusine": SCENARIOS / "debusine" / "tasks.jsonl",
}


def _jobmatch(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "scenario", "run", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_file_of_each_family_runs_and_every_case_matches() -> None:
    """Issue 24 item 4: `jobmatch scenario run` takes Momotor, Flux and debusine files,
    as a user runs it, and says so in its summary."""
    for family, path in FAMILY_FILES.items():
        cases = [line for line in path.read_text().splitlines() if line.strip()]
        result = _jobmatch(str(path))
        assert result.returncode == 0, (family, result.stdout, result.stderr)
        assert result.stdout.splitlines() == [
            f"{path}: {len(cases)} cases, {len(cases)} agree",
            f"scenarios: {len(cases)} matched, 0 differ, {len(cases)} run",
        ]


def test_the_ordering_cases_run_from_the_command_line() -> None:
    """tests/scenarios/ordering/ (ordering, usage, weights, groups and group weights) as a
    user runs it: every case agrees."""
    path = SCENARIOS / "ordering" / "momotor.jsonl"
    cases = [line for line in path.read_text().splitlines() if line.strip()]
    result = _jobmatch(str(path))
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stdout.splitlines()[-1] == (
        f"scenarios: {len(cases)} matched, 0 differ, {len(cases)} run"
    )


def test_a_differing_case_of_a_family_exits_1_and_says_where(tmp_path: Path) -> None:
    """debusine-09 expecting the newest task first (debusine pulls the oldest)."""
    cases = [json.loads(line) for line in FAMILY_FILES["debusine"].read_text().splitlines()]
    (case,) = [case for case in cases if case["id"] == "debusine-09"]
    case["expected"]["pull_order"][0]["job"] = "third"
    path = tmp_path / "differs.jsonl"
    path.write_text(json.dumps(case) + "\n")
    result = _jobmatch("--json", str(path))
    assert result.returncode == ExitCode.REFUSED, result.stderr
    (record,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert record["matched"] is False
    assert record["differences"] == [
        {"path": ".pull_order[0].job", "expected": "third", "actual": "first"}
    ]
    summary = _jobmatch(str(path)).stdout.splitlines()[-1]
    assert summary == "scenarios: 0 matched, 1 differ, 1 run"


@pytest.mark.parametrize(
    ("worker", "job", "words"),
    [
        ({"name": "w", "rank": 0}, {"resources": "a: x"}, "rank not among the fields of momotor"),
        ({"name": "w"}, {"resources": "a: x", "priority": "high"}, "job: priority: Input should"),
    ],
)
def test_a_case_breaking_the_format_is_a_usage_error(
    tmp_path: Path, worker: dict[str, object], job: dict[str, object], words: str
) -> None:
    case = {"family": "momotor", "id": "m", "cluster": {"workers": [worker]}, "jobs": [job]}
    path = tmp_path / "wrong.jsonl"
    path.write_text(json.dumps(case) + "\n")
    result = _jobmatch(str(path))
    assert result.returncode == ExitCode.USAGE
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert words in result.stderr


def test_the_examples_of_the_scenario_page_run_and_match(tmp_path: Path) -> None:
    """docs/scenarios.md shows one case per family; run as a reader would run them."""
    page = (SCENARIOS.parents[1] / "docs" / "scenarios.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", page, re.DOTALL)
    cases = [json.loads(block) for block in blocks]
    assert [case["family"] for case in cases] == ["momotor", "flux", "debusine"]
    path = tmp_path / "examples.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    result = _jobmatch(str(path))
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == "scenarios: 3 matched, 0 differ, 3 run"


def test_the_readme_counts_the_scenarios_it_promises() -> None:
    readme = (SCENARIOS.parents[1] / "README.md").read_text()
    found = re.search(
        r"holds (\d+) of them,\s+each naming\s+the upstream source of its answer: (\d+) Grid "
        r"Engine, (\d+) Momotor, (\d+) Flux and (\d+) debusine",
        readme,
    )
    assert found is not None
    total, *per_family = (int(number) for number in found.groups())

    def count(family: str) -> int:
        return sum(
            1
            for path in (SCENARIOS / family).glob("*.jsonl")
            for line in path.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        )

    assert per_family == [count(f) for f in ("sge", "momotor", "flux", "debusine")]
    assert total == sum(per_family)
