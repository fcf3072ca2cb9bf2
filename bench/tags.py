"""Momotor tags: jobmatch's ``app.notations.momotor`` against ``momotor.shared.resources``.

Run ``python bench/tags.py`` (from the repository root). It parses and matches the same
generated definitions with both implementations in one run and prints the rates and the
ratios. Not a test: pytest does not collect it, and it never gates CI. The random seed is
fixed, so every run uses the same inputs.

The workload imitates a teaching/CI cluster (as bench/_data.py does, with richer
definitions). Workers are machine images that offer many optional tags (``?java``) in about
seven groups, a few GPU nodes require ``gpu: cuda`` and some exclude a tag; jobs require a
language, often a version and tools, sometimes prefer or exclude an architecture, GPU or OS,
and a quarter name data sets whose values hold ``;`` or ``,``. Values that hold ``, ; :`` are
quoted (single or double) or escaped, as people write them, and a few others are quoted on a
whim; layouts mix ``"; "``, ``";"``, one group a line (with or without a final newline) and
indented lines, and ``": "``/``":"``, ``", "``/``","``. The run prints the shape of the
generated data (groups and items per definition, share with quotes, escapes, newlines), so
the figures can be judged against it, and checks that both implementations parse every
generated definition to the same groups and items.

Measurements:

* ``from_string, distinct``: every definition differs. Each round starts with jobmatch's
  string cache and intern tables empty; the tables then fill up during the round as they do
  in a running server (tags and groups recur across definitions, whole strings do not).
* ``from_string, jobs + a new tag each``: a stress line, not a realistic workload: every
  job gets one more group with a tag no other definition has, so the intern tables miss on
  every definition.
* ``from_string, repeated``: draws from a small pool, as a real queue resubmits the same
  requests; jobmatch's LRU cache of exact strings answers most of them.
* ``match``: a job (the receiver) against a worker, NoMatch counted as a result; pairs of
  distinct definitions, and jobs against a small fleet of workers. The results of both
  implementations are compared on every pair before timing, and their mix is printed.

Times are CPU time of this process (``time.process_time``), rounds of the two
implementations alternate and the best of five counts, so other load on a shared machine
distorts little and affects both alike.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import load_average
from momotor.shared.resources import NoMatch as MomotorNoMatch
from momotor.shared.resources import Resources as MomotorResources

from app.notations.momotor.resources import Resources, clear_caches
from app.notations.momotor.strengths import NoMatch

SEED = 20240611
JOBS = 20_000
WORKERS = 5_000
POOL_JOBS = 200
FLEET = 50
REPEATS = 20_000
PAIRS = 40_000
ROUNDS = 5

LANGUAGES = ["java", "python", "c", "cpp", "rust", "go", "kotlin", "haskell", "scala", "js"]
LANGUAGE_WEIGHTS = [6, 8, 3, 2, 2, 2, 1, 1, 1, 2]
VERSIONS = {
    "java": ["8", "11", "17", "21", "22"],
    "python": ["3.9", "3.10", "3.11", "3.12", "3.13"],
    "rust": ["1.75", "1.79", "1.82"],
}
TOOLS = ["gcc", "clang", "make", "cmake", "maven", "gradle", "java agent", "valgrind", "node 20"]
CHECKERS = ["checkstyle", "pylint", "ruff", "clippy", "spotbugs", "mypy"]
COURSES = ["2IP90", "2IPC0", "2IL50", "JBI010", "2AMS10", "2IP90:resit"]
DATASETS = ["set A; part 1", "set A; part 2", "x,y grid", "plain", "large inputs"]


def _write(prefix: str, value: str, rng: random.Random) -> str:
    """One item as a person writes it: bare, or quoted or escaped where it must be."""
    if any(c in value for c in ",;:"):
        way = rng.random()
        if way < 0.4:
            return f"{prefix}'{value}'"
        if way < 0.6:
            return f'{prefix}"{value}"'
        return prefix + "".join("\\" + c if c in ",;:" else c for c in value)
    if rng.random() < 0.005:
        return f"{prefix}'{value}'"
    return prefix + value


def _layout(rng: random.Random, groups: list[tuple[str, list[str]]]) -> str:
    colon = rng.choice([": ", ": ", ":"])
    comma = rng.choice([", ", ", ", ","])
    lines = [name + colon + comma.join(items) for name, items in groups]
    way = rng.random()
    if way < 0.45:
        return "; ".join(lines)
    if way < 0.55:
        return ";".join(lines)
    if way < 0.85:
        return "\n".join(lines) + "\n"
    return "\n".join("    " + line for line in lines)


def worker_definition(rng: random.Random) -> str:
    """A machine image: many optional tags, rarely a required or excluded one."""

    def offer(value: str) -> str:
        return _write("?", value, rng)

    groups: list[tuple[str, list[str]]] = []
    languages = rng.sample(LANGUAGES, rng.randint(3, 7))
    items = [offer(language) for language in languages]
    if rng.random() < 0.05:
        items.append("~" + rng.choice([lang for lang in LANGUAGES if lang not in languages]))
    groups.append(("language", items))
    for language, versions in VERSIONS.items():
        if language in languages:
            offered = rng.sample(versions, rng.randint(2, len(versions)))
            groups.append((language, [offer(v) for v in offered]))
    groups.append(("arch", [offer(rng.choices(["x86_64", "aarch64"], weights=[8, 2])[0])]))
    groups.append(("os", [offer(rng.choices(["linux", "windows", "macos"], weights=[8, 1, 1])[0])]))
    groups.append(("tools", [offer(t) for t in rng.sample(TOOLS, rng.randint(3, 7))]))
    if rng.random() < 0.7:
        groups.append(("checker", [offer(c) for c in rng.sample(CHECKERS, rng.randint(2, 5))]))
    if rng.random() < 0.5:
        groups.append(("course", [offer(c) for c in rng.sample(COURSES, rng.randint(2, 5))]))
    if rng.random() < 0.3:
        groups.append(("memory-class", [offer(rng.choice(["small", "medium", "large"]))]))
    gpu = rng.random()
    if gpu < 0.10:
        groups.append(("gpu", ["cuda"]))  # a GPU node: only jobs that ask for CUDA
    elif gpu < 0.15:
        groups.append(("gpu", ["?rocm", "~cuda"]))
    rng.shuffle(groups)
    return _layout(rng, groups)


def job_definition(rng: random.Random) -> str:
    """A job request: a required language, often a version and tools, a few preferences."""
    groups: list[tuple[str, list[str]]] = []
    language = rng.choices(LANGUAGES, weights=LANGUAGE_WEIGHTS)[0]
    groups.append(("language", [language]))
    if language in VERSIONS and rng.random() < 0.7:
        versions = rng.sample(VERSIONS[language], rng.randint(1, 2))
        groups.append((language, versions if len(versions) == 1 else ["?" + v for v in versions]))
    arch = rng.random()
    if arch < 0.3:
        groups.append(("arch", ["?x86_64"]))
    elif arch < 0.4:
        groups.append(("arch", ["x86_64", "~aarch64"]))
    if rng.random() < 0.6:
        tools = rng.sample(TOOLS, rng.randint(1, 3))
        groups.append(("tools", [_write(rng.choice(["", "", "?"]), t, rng) for t in tools]))
    if rng.random() < 0.4:
        checkers = rng.sample(CHECKERS, rng.randint(1, 2))
        groups.append(("checker", [_write("?", c, rng) for c in checkers]))
    if rng.random() < 0.3:
        groups.append(("course", [_write("", rng.choice(COURSES), rng)]))
    if rng.random() < 0.25:
        data = rng.sample(DATASETS, rng.randint(1, 3))
        groups.append(("dataset", [_write("?", d, rng) for d in data]))
    gpu = rng.random()
    if gpu < 0.1:
        groups.append(("gpu", ["cuda"]))
    elif gpu < 0.2:
        groups.append(("gpu", ["~cuda"]))
    system = rng.random()
    if system < 0.2:
        groups.append(("os", ["linux"]))
    elif system < 0.3:
        groups.append(("os", ["~windows", "~macos"]))
    rng.shuffle(groups)
    return _layout(rng, groups)


def distinct(rng: random.Random, make: Callable[[random.Random], str], count: int) -> list[str]:
    """``count`` different definitions."""
    found: dict[str, None] = {}
    while len(found) < count:
        found[make(rng)] = None
    return list(found)


def describe(label: str, texts: Sequence[str]) -> None:
    """Print the shape of the definitions; stop if the implementations parse one apart."""
    parsed = [MomotorResources.from_string(text) for text in texts]
    for text, theirs in zip(texts, parsed, strict=True):
        ours = list(Resources.from_string(text).as_tuples())
        if ours != [(name, tuple(items)) for name, items in theirs.as_tuples()]:
            raise SystemExit(f"parses differ on {text!r}")
    groups = sum(len(r.group_names()) for r in parsed) / len(texts)
    items = sum(len(r.get(n).items) for r in parsed for n in r.group_names()) / len(texts)
    chars = sum(len(text) for text in texts) / len(texts)

    def share(test: Callable[[str], bool]) -> str:
        return f"{100 * sum(map(test, texts)) / len(texts):.0f}%"

    quotes = share(lambda text: "'" in text or '"' in text)
    escapes = share(lambda text: "\\" in text)
    newlines = share(lambda text: "\n" in text)
    print(
        f"{label:<8} {len(texts):>6,} definitions: {groups:.1f} groups, {items:.1f} items,"
        f" {chars:.0f} chars on average; quotes in {quotes}, backslashes in {escapes},"
        f" newlines in {newlines}"
    )


def _parse_all(parse: Callable[[str], object], texts: Sequence[str]) -> Callable[[], object]:
    def run() -> object:
        for text in texts:
            parse(text)
        return None

    return run


def _parse_cold(texts: Sequence[str]) -> Callable[[], object]:
    # Every round starts with an empty string cache and empty intern tables.
    def run() -> object:
        clear_caches()
        for text in texts:
            Resources.from_string(text)
        return None

    return run


def _match_all(
    pairs: Sequence[tuple[object, object]], no_match: type[Exception]
) -> Callable[[], object]:
    def run() -> object:
        # try/except rather than contextlib.suppress: a context manager per pair would
        # add the same overhead to both rates and hide part of the difference.
        for task, worker in pairs:
            try:  # noqa: SIM105
                task.match(worker)  # type: ignore[attr-defined]
            except no_match:
                pass
        return None

    return run


def compare(
    label: str, count: int, ours: Callable[[], object], theirs: Callable[[], object], unit: str
) -> None:
    """Alternate rounds of both; print the best rate of each and the ratio."""
    best_ours = best_theirs = float("inf")
    for _ in range(ROUNDS):
        start = time.process_time()
        theirs()
        best_theirs = min(best_theirs, time.process_time() - start)
        start = time.process_time()
        ours()
        best_ours = min(best_ours, time.process_time() - start)
    rate_ours, rate_theirs = count / best_ours, count / best_theirs
    print(
        f"{label:<34} jobmatch {rate_ours:>11,.0f} {unit}   momotor {rate_theirs:>8,.0f} {unit}"
        f"   ratio {rate_ours / rate_theirs:5.1f}x   {load_average()}"
    )


def _outcome(task: object, worker: object, no_match: type[Exception]) -> object:
    try:
        return task.match(worker)  # type: ignore[attr-defined]
    except no_match:
        return "NoMatch"


def check_pairs(
    label: str, ours: Sequence[tuple[object, object]], theirs: Sequence[tuple[object, object]]
) -> None:
    """Both implementations must give the same result on every pair; print the mix."""
    mix: Counter[object] = Counter()
    for (task, worker), (m_task, m_worker) in zip(ours, theirs, strict=True):
        result = _outcome(task, worker, NoMatch)
        if result != _outcome(m_task, m_worker, MomotorNoMatch):
            raise SystemExit(f"results differ on {task!r} vs {worker!r}")
        mix[result] += 1
    shares = ", ".join(f"{result} {100 * n / len(ours):.0f}%" for result, n in mix.most_common())
    print(f"({label}: same results on all {len(ours):,} pairs; {shares})")


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"The sizes are fixed: {JOBS:,} jobs, {WORKERS:,} workers, {PAIRS:,} pairs, "
        f"best of {ROUNDS} rounds.",
    ).parse_args()
    rng = random.Random(SEED)
    jobs = distinct(rng, job_definition, JOBS)
    workers = distinct(rng, worker_definition, WORKERS)
    pool = distinct(rng, job_definition, POOL_JOBS)
    fleet = distinct(rng, worker_definition, FLEET)
    repeated = [
        rng.choice(pool) if rng.random() < 0.8 else rng.choice(fleet) for _ in range(REPEATS)
    ]

    print(f"Python {sys.version.split()[0]}; seed {SEED}; best of {ROUNDS} alternating rounds")
    describe("jobs", jobs)
    describe("workers", workers)

    parse_theirs = MomotorResources.from_string
    compare(
        "from_string, distinct jobs",
        len(jobs),
        _parse_cold(jobs),
        _parse_all(parse_theirs, jobs),
        "defs/s",
    )
    compare(
        "from_string, distinct workers",
        len(workers),
        _parse_cold(workers),
        _parse_all(parse_theirs, workers),
        "defs/s",
    )
    # Stress, not the target: every job also carries a tag no other definition has, so the
    # intern tables miss on every definition (a new tag, a new group each time).
    unique = [f"{text.strip()}; build: ?b{serial}" for serial, text in enumerate(jobs)]
    compare(
        "from_string, jobs + a new tag each",
        len(unique),
        _parse_cold(unique),
        _parse_all(parse_theirs, unique),
        "defs/s",
    )
    clear_caches()
    compare(
        "from_string, repeated (pool)",
        len(repeated),
        _parse_all(Resources.from_string, repeated),
        _parse_all(parse_theirs, repeated),
        "defs/s",
    )

    jobs_ours = [Resources.from_string(text) for text in jobs]
    jobs_theirs = [parse_theirs(text) for text in jobs]
    workers_ours = [Resources.from_string(text) for text in workers]
    workers_theirs = [parse_theirs(text) for text in workers]
    fleet_ours = [Resources.from_string(text) for text in fleet]
    fleet_theirs = [parse_theirs(text) for text in fleet]

    picks = [(rng.randrange(JOBS), rng.randrange(WORKERS)) for _ in range(PAIRS)]
    pairs_ours = [(jobs_ours[t], workers_ours[w]) for t, w in picks]
    pairs_theirs = [(jobs_theirs[t], workers_theirs[w]) for t, w in picks]
    check_pairs("distinct pairs", pairs_ours, pairs_theirs)
    compare(
        "match, distinct pairs",
        PAIRS,
        _match_all(pairs_ours, NoMatch),
        _match_all(pairs_theirs, MomotorNoMatch),
        "pairs/s",
    )

    picks = [(rng.randrange(JOBS), rng.randrange(FLEET)) for _ in range(PAIRS)]
    pairs_ours = [(jobs_ours[t], fleet_ours[w]) for t, w in picks]
    pairs_theirs = [(jobs_theirs[t], fleet_theirs[w]) for t, w in picks]
    check_pairs("jobs vs fleet", pairs_ours, pairs_theirs)
    compare(
        "match, jobs vs a fleet of workers",
        PAIRS,
        _match_all(pairs_ours, NoMatch),
        _match_all(pairs_theirs, MomotorNoMatch),
        "pairs/s",
    )


if __name__ == "__main__":
    main()
