"""``python -m conformance.gridengine [--record DIR] [FILE ...]``: the cases (default: every
conformance/gridengine/cases/*.jsonl) on the real Grid Engine and on jobmatch, ``agree`` or
``DIFFER`` per case and ``N/M agree`` at the end. Exit status 0 when the harness ran (cases
may differ: it is a report), 1 when it could not. ``--stop`` stops the daemons
conformance/gridengine/install.sh started (and only those)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from app.matching.scenarios.cases import fresh_sqlite_databases, read_cases
from conformance.gridengine import cluster, referee

CASES = Path(__file__).resolve().parent / "cases"
#: The verdicts where both sides answered (recorded with --record).
REFEREED = ("agree", "DIFFER", "documented divergence", "failed")


def stop_started() -> list[str]:
    """Stop the daemons the installer recorded as started by it; returns what it stopped."""
    started = cluster.STATE / "started"
    if not started.exists():
        return []
    stopped = []
    for line in started.read_text().splitlines():
        if not line.strip():
            continue
        name, pid_text = line.split()
        pid = int(pid_text)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "sge_" not in cmdline:
            continue  # the pid was reused by something else
        os.kill(pid, signal.SIGTERM)
        for _ in range(40):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.25)
        stopped.append(f"{name} ({pid})")
    started.write_text("")
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.gridengine")
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--record", type=Path, help="write one vector file per case file here")
    parser.add_argument("--only", action="append", default=[], help="run only these case ids")
    parser.add_argument("--stop", action="store_true", help="stop the daemons install.sh started")
    args = parser.parse_args(argv)
    if args.stop:
        print("stopped:", ", ".join(stop_started()) or "nothing (install.sh started none)")
        return 0
    files = args.files or sorted(CASES.glob("*.jsonl"))
    try:
        version = cluster.version()
    except cluster.GridEngineError as error:
        print(f"conformance-gridengine: {error}", file=sys.stderr)
        return 1
    counts: dict[str, int] = {}
    started = time.monotonic()
    try:
        with fresh_sqlite_databases() as make:
            for path in files:
                cases = read_cases(path)
                if args.only:
                    cases = [c for c in cases if str(c["id"]) in args.only]
                vectors = []
                print(f"== {path.name}", flush=True)
                carried = (
                    referee.carried_divergences(args.record / path.name)
                    if args.record is not None
                    else {}
                )
                for case in cases:
                    case = {**carried.get(str(case["id"]), {}), **case}
                    verdict = referee.referee(case, make)
                    counts[verdict.status] = counts.get(verdict.status, 0) + 1
                    print(referee.describe(verdict), flush=True)
                    if verdict.status in REFEREED:
                        vectors.append(referee.vector(case, verdict, version))
                if args.record is not None and vectors:
                    args.record.mkdir(parents=True, exist_ok=True)
                    with (args.record / path.name).open("w", encoding="utf-8") as out:
                        for line in vectors:
                            out.write(json.dumps(line, sort_keys=False) + "\n")
    except cluster.GridEngineError as error:
        print(f"conformance-gridengine: harness failed: {error}", file=sys.stderr)
        return 1
    refereed = sum(counts.get(s, 0) for s in REFEREED)
    print(
        f"{counts.get('agree', 0)}/{refereed} agree; "
        f"{counts.get('DIFFER', 0)} differ, "
        f"{counts.get('documented divergence', 0)} documented divergences, "
        f"{counts.get('failed', 0)} failed in jobmatch, "
        f"{counts.get('not refereeable', 0)} not refereeable here, "
        f"{counts.get('case error', 0)} case errors ({time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
