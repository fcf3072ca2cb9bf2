"""Momotor tags: jobmatch's ``app.notations.tags`` against ``momotor.shared.resources``.

Run ``python bench/tags.py`` (from the repository root). It parses and matches the same
generated definitions with both implementations in one run and prints the rates and the
ratios, for distinct inputs (every definition is new: no cache helps) and for repeated ones
(a small pool of definitions drawn again and again, as a real job queue sends them).
The random seed is fixed, so every run uses the same inputs. Not a test: pytest does not
collect it (the file name does not start with ``test_``), and it never gates CI.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from momotor.shared.resources import NoMatch as MomotorNoMatch
from momotor.shared.resources import Resources as MomotorResources

from app.notations import tags

SEED = 20240611
DISTINCT = 20_000
POOL = 200
REPEATS = 20_000
PAIRS = 40_000

_GROUPS = {
    "language": ["java", "python", "c", "rust", "go", "kotlin"],
    "java": ["8", "11", "12", "13", "17", "21"],
    "python": ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12"],
    "arch": ["x86_64", "arm", "aarch64", "riscv"],
    "os": ["linux", "windows", "macos", "freebsd"],
    "gpu": ["cuda", "rocm", "none"],
    "test case": ["one; two, or more", "list,of,strings", "plain"],
}


def _item(rng: random.Random, value: str) -> str:
    prefix = rng.choices(["", "?", "~"], weights=[5, 4, 1])[0]
    if any(c in value for c in ",;:") or rng.random() < 0.05:
        return f"{prefix}'{value}'"
    return prefix + value


def definition(rng: random.Random, serial: int) -> str:
    """A realistic definition; ``serial`` adds a unique build tag so that strings differ."""
    names = rng.sample(sorted(_GROUPS), rng.randint(1, 4))
    parts = []
    for name in names:
        values = rng.sample(_GROUPS[name], rng.randint(1, min(3, len(_GROUPS[name]))))
        items = ", ".join(_item(rng, value) for value in values)
        parts.append(f"{name}: {items}")
    parts.append(f"build: ?b{serial}")
    return rng.choice(["; ", "\n"]).join(parts)


def _rate(count: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return count / best


def _parse_all(parse: Callable[[str], object], texts: Sequence[str]) -> Callable[[], object]:
    def run() -> object:
        for text in texts:
            parse(text)
        return None

    return run


def _match_all(
    pairs: Sequence[tuple[object, object]], no_match: type[Exception]
) -> Callable[[], object]:
    def run() -> object:
        for task, worker in pairs:
            with contextlib.suppress(no_match):
                task.match(worker)  # type: ignore[attr-defined]
        return None

    return run


def _distinct_parse(texts: Sequence[str]) -> Callable[[], object]:
    # Every round starts with empty caches, so each string is parsed from scratch.
    def run() -> object:
        tags._cached_plain.cache_clear()
        tags._TAGS.clear()
        tags._GROUPS.clear()
        tags._GROUP_TEXTS.clear()
        tags._NAMES.clear()
        for text in texts:
            tags.Resources.from_string(text)
        return None

    return run


def _line(label: str, ours: float, theirs: float, unit: str) -> None:
    print(
        f"{label:<34} jobmatch {ours:>11,.0f} {unit}   momotor {theirs:>9,.0f} {unit}"
        f"   ratio {ours / theirs:5.1f}x"
    )


def main() -> None:
    rng = random.Random(SEED)
    distinct = [definition(rng, n) for n in range(DISTINCT)]
    pool = [definition(rng, DISTINCT + n) for n in range(POOL)]
    repeated = [rng.choice(pool) for _ in range(REPEATS)]

    print(f"Python {sys.version.split()[0]}; seed {SEED}; best of 3 rounds")
    theirs = _rate(len(distinct), _parse_all(MomotorResources.from_string, distinct))
    ours = _rate(len(distinct), _distinct_parse(distinct))
    _line("from_string, distinct inputs", ours, theirs, "defs/s")
    theirs = _rate(len(repeated), _parse_all(MomotorResources.from_string, repeated))
    ours = _rate(len(repeated), _parse_all(tags.Resources.from_string, repeated))
    _line("from_string, repeated inputs", ours, theirs, "defs/s")

    # Match: a job against a worker, both from the generator, NoMatch counted as a result.
    parsed_ours = [tags.Resources.from_string(text) for text in distinct]
    parsed_theirs = [MomotorResources.from_string(text) for text in distinct]
    picks = [(rng.randrange(DISTINCT), rng.randrange(DISTINCT)) for _ in range(PAIRS)]
    workers_ours = [tags.Resources.from_string(text) for text in pool]
    workers_theirs = [MomotorResources.from_string(text) for text in pool]
    agree = 0
    for task, worker in picks[:2000]:
        results = []
        for impl, no_match in ((parsed_ours, tags.NoMatch), (parsed_theirs, MomotorNoMatch)):
            try:
                results.append(impl[task].match(impl[worker]))  # type: ignore[attr-defined]
            except no_match:
                results.append("NoMatch")
        agree += results[0] == results[1]
    print(f"(match results agree on {agree} of 2000 sampled pairs)")

    pairs_ours = [(parsed_ours[t], parsed_ours[w]) for t, w in picks]
    pairs_theirs = [(parsed_theirs[t], parsed_theirs[w]) for t, w in picks]
    theirs = _rate(PAIRS, _match_all(pairs_theirs, MomotorNoMatch))
    ours = _rate(PAIRS, _match_all(pairs_ours, tags.NoMatch))
    _line("match, distinct pairs", ours, theirs, "pairs/s")

    pool_picks = [(rng.randrange(DISTINCT), rng.randrange(POOL)) for _ in range(PAIRS)]
    pairs_ours = [(parsed_ours[t], workers_ours[w]) for t, w in pool_picks]
    pairs_theirs = [(parsed_theirs[t], workers_theirs[w]) for t, w in pool_picks]
    theirs = _rate(PAIRS, _match_all(pairs_theirs, MomotorNoMatch))
    ours = _rate(PAIRS, _match_all(pairs_ours, tags.NoMatch))
    _line("match, jobs vs a pool of workers", ours, theirs, "pairs/s")


if __name__ == "__main__":
    main()
