"""The benchmark scripts stay runnable: each answers ``--help`` (so its imports of app/ and
of its sibling helpers still resolve after a move), and the what-if bench runs end to end at
a tiny size on SQLite. Timing is never asserted here; the figures are the benches' own
business.

The small run exists because a bench that only parses its arguments can still break on
its first real call: ``bench/whatif.py`` and ``bench/longpoll.py`` once passed ``keep``
to ``scratch_database`` positionally, which takes it by keyword only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(
    path.name for path in (ROOT / "bench").glob("*.py") if not path.name.startswith("_")
)


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("script", BENCHES)
def test_every_bench_answers_help(script: str) -> None:
    result = _run(f"bench/{script}", "--help", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:"), result.stdout


def test_the_what_if_bench_runs_at_a_tiny_size_on_sqlite() -> None:
    result = _run(
        "bench/whatif.py",
        "sqlite",
        "--workers",
        "6",
        "--categories",
        "2",
        "--jobs",
        "6",
        "--repeat",
        "1",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "ratio what-if / yardstick" in result.stdout, result.stdout
    assert "load " in result.stdout, result.stdout


def test_the_http_floor_bench_takes_its_ratio_over_alternating_rounds_on_sqlite() -> None:
    """Issue 23's ratio: the floor and jobmatch run once per round, back to back, each
    round's ratio is printed, and the last line is their median."""
    result = _run(
        "bench/http_floor.py",
        "--database",
        "sqlite",
        "--seconds",
        "0.3",
        "--rounds",
        "2",
        "--clients",
        "1",
        "--processes",
        "1",
        "--jobs",
        "200",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum(line.lstrip().startswith("fastapi+db") for line in lines) == 2, result.stdout
    assert sum(line.lstrip().startswith("jobmatch ") for line in lines) == 2, result.stdout
    rounds = [float(line.rsplit(" ", 1)[1]) for line in lines if "round " in line]
    assert len(rounds) == 2, result.stdout
    label, _, ratio = lines[-1].rpartition(" ")
    assert label == "ratio jobmatch/floor", result.stdout
    # The median of two rounds is their mean; each was printed rounded to two decimals.
    assert abs(float(ratio) - (rounds[0] + rounds[1]) / 2) <= 0.011, result.stdout
    assert "a client stopped" not in result.stdout, result.stdout


def test_the_peers_bench_drains_jobmatch_beside_the_floor_at_a_tiny_size() -> None:
    """Issue 38's one-request floor (bench/peers.py's FloorApp) and jobmatch's
    finish-carrying drain run end to end, and their ratio is printed; the peers need
    PostgreSQL and the bench extra, so only jobmatch and the floor run here."""
    url = os.environ.get("JOBMATCH_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("bench/peers.py runs on PostgreSQL (JOBMATCH_TEST_POSTGRES_URL)")
    result = _run(
        "bench/peers.py",
        "--systems",
        "jobmatch",
        "floor",
        "--modes",
        "finish-carrying",
        "--rounds",
        "1",
        "--jobs",
        "40",
        "--consumers",
        "2",
        "--processes",
        "1",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    drains = [line.split() for line in result.stdout.splitlines() if " drain " in line]
    assert {(words[0], words[2]) for words in drains} >= {
        ("floor", "one-request"),
        ("jobmatch", "finish-carrying"),
    }, result.stdout
    assert "a client stopped" not in result.stdout, result.stdout
    assert "ratio drain finish-carrying/floor" in result.stdout, result.stdout
