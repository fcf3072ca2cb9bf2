"""The recorded answers of the real Grid Engine against today's jobmatch, without a Grid
Engine: ``python -m conformance.gridengine.replay [DIR] [--mark ID=ANCHOR ...]``.

Prints per vector ``agree``, ``DIFFER`` (both answers), ``documented divergence`` or
``failed`` (jobmatch raised), and ``N/M agree`` at the end. ``--mark ID=ANCHOR``
documents a difference: the vector gets ``divergence`` (a heading anchor of
docs/notations/gridengine.md, whose divergence table says why) and ``jobmatch_answer``
(what jobmatch answers today), so that the suite's replay
(tests/matching/gridengine/test_recorded_gridengine.py) holds jobmatch to that answer and
notices when it changes. ``--unmark ID`` takes a documentation back.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.matching.scenarios.cases import fresh_sqlite_databases
from conformance.gridengine.referee import compared, gives_documented_answer, jobmatch_answer

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "sge" / "gridengine-8.1.9"


class MarkError(Exception):
    """A ``--mark``/``--unmark`` names no recorded vector, or a mark is not ``ID=ANCHOR``."""


def _marks(given: list[str]) -> dict[str, str]:
    out = {}
    for item in given:
        case_id, sep, anchor = item.partition("=")
        if not sep or not case_id or not anchor:
            raise MarkError(f"--mark {item!r}: expected ID=ANCHOR")
        out[case_id] = anchor
    return out


def _status(vector: dict[str, Any], answer: list[dict[str, Any]]) -> str:
    recorded = compared(vector["gridengine"]["answer"]["jobs"])
    if answer == recorded:
        return "agree"
    if gives_documented_answer(vector, answer):
        return "documented divergence"
    return "DIFFER"


def replay(directory: Path, marks: dict[str, str], unmarks: set[str]) -> int:
    counts: dict[str, int] = {}
    seen: set[str] = set()
    with fresh_sqlite_databases() as make:
        for path in sorted(directory.glob("*.jsonl")):
            print(f"== {path.name}", flush=True)
            lines = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
            changed = False
            for vector in lines:
                case_id = str(vector["id"])
                database = make()
                try:
                    answer = jobmatch_answer(database, vector)
                except Exception as error:  # a vector jobmatch cannot run is its failure
                    counts["failed"] = counts.get("failed", 0) + 1
                    print(f"{case_id}: failed: {type(error).__name__}: {error}", flush=True)
                    continue
                finally:
                    database.dispose()
                if case_id in marks:
                    vector["divergence"] = marks[case_id]
                    vector["jobmatch_answer"] = {"jobs": answer}
                    changed = True
                    seen.add(case_id)
                if case_id in unmarks:
                    vector.pop("divergence", None)
                    vector.pop("jobmatch_answer", None)
                    changed = True
                    seen.add(case_id)
                status = _status(vector, answer)
                counts[status] = counts.get(status, 0) + 1
                line = f"{case_id}: {status}"
                if status == "DIFFER":
                    recorded = compared(vector["gridengine"]["answer"]["jobs"])
                    line += (
                        f"\n  gridengine: {json.dumps(recorded, sort_keys=True)}"
                        f"\n  jobmatch:   {json.dumps(answer, sort_keys=True)}"
                    )
                elif status == "documented divergence":
                    line += f" ({vector['divergence']})"
                print(line, flush=True)
            if changed:
                path.write_text("".join(json.dumps(v) + "\n" for v in lines), "utf-8")
    missing = (set(marks) | unmarks) - seen
    if missing:
        raise MarkError(f"no recorded vector has the id {sorted(missing)[0]!r}")
    total = sum(counts.values())
    print(
        f"{counts.get('agree', 0)}/{total} agree; "
        f"{counts.get('documented divergence', 0)} documented divergences, "
        f"{counts.get('DIFFER', 0)} differ, {counts.get('failed', 0)} failed in jobmatch"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.gridengine.replay")
    parser.add_argument("directory", nargs="?", type=Path, default=RECORDED)
    parser.add_argument("--mark", action="append", default=[], help="ID=ANCHOR")
    parser.add_argument("--unmark", action="append", default=[], help="ID")
    args = parser.parse_args(argv)
    try:
        return replay(args.directory, _marks(args.mark), set(args.unmark))
    except MarkError as error:
        print(f"replay: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
