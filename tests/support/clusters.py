"""Random clusters and job mixes with a fixed seed, for tests and benchmarks."""

from __future__ import annotations

import random

GROUPS = {
    "language": ["java", "python", "c", "rust"],
    "java": ["8", "11", "17"],
    "arch": ["x86", "arm"],
    "gpu": ["cuda", "rocm"],
}


def _group_text(rng: random.Random, name: str, *, worker: bool) -> str:
    values = rng.sample(GROUPS[name], rng.randint(0, len(GROUPS[name])))
    items = []
    for value in values:
        # Workers mostly offer (optional); required worker tags act as taints, so rarer.
        weights = (1, 6, 1) if worker else (4, 2, 1)
        prefix = rng.choices(["", "?", "~"], weights=weights)[0]
        items.append(prefix + value)
    return f"{name}: {', '.join(items)}"


def definition(rng: random.Random, *, worker: bool) -> str:
    names = rng.sample(sorted(GROUPS), rng.randint(0, 3))
    return "\n".join(_group_text(rng, name, worker=worker) for name in names)


def cluster(
    seed: int, workers: int, jobs: int
) -> tuple[list[tuple[str, str, int]], list[tuple[str, int, int]]]:
    """Workers as (name, definition, slots) and jobs as (definition, slots, priority)."""
    rng = random.Random(seed)
    worker_rows = [
        (f"w{i:03d}", definition(rng, worker=True), rng.randint(1, 4)) for i in range(workers)
    ]
    job_rows = [
        (definition(rng, worker=False), rng.randint(1, 3), rng.randint(0, 2)) for _ in range(jobs)
    ]
    return worker_rows, job_rows
