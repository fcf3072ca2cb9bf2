"""Synthetic cluster data for the dispatch benchmark (bench/dispatch.py).

Workers are made before any category exists. The first worker of each machine profile is
registered through the real service (``upsert_worker``: tag rows, queue instances, misfit
cache) in a few large transactions; the others are copies of their profile's rows made with
bulk INSERTs (the same rows, since no misfit row is owed yet; :func:`verify_clones` checks
the result against a recache once the categories exist). Every category is created by the
real submission path (``submit_job``: category row, tag rows, misfits against every worker);
the remaining jobs of a category are then bulk-inserted with plain INSERTs that reference the
existing category id. That is the job row ``submit_job`` would store for them: the category
and its misfits are per category. (They get no "submitted" history event; nothing a pull or
a candidates query reads.)

Definitions are Momotor tags with the variety a teaching/CI cluster shows: languages with
versions, architectures, operating systems, GPUs; most workers offer optional tags (``?x``),
some GPU nodes require ``gpu: cuda`` (they only take GPU jobs), some exclude a tag; jobs
require a language, often a version, sometimes prefer or exclude an architecture or GPU.
Workers come from a pool of machine profiles, as real clusters are built from a few
hardware/software images. One worker fits exactly one category ("picky"), one fits none.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

from sqlalchemy import Table, insert, select

from app.db.engine import Database
from app.db.models import (
    Category,
    CategoryFit,
    CategoryMisfit,
    Job,
    JobState,
    QueueInstance,
    Worker,
    WorkerState,
    WorkerTag,
)
from app.matching.misfits import recache_worker_misfits
from app.matching.submission import JobSpec, submit_job
from app.matching.workers import QueueSpec, WorkerSpec, upsert_worker

LANGUAGES = ["java", "python", "c", "rust", "go", "kotlin", "haskell", "scala"]
LANGUAGE_WEIGHTS = [6, 8, 3, 2, 2, 1, 1, 1]
VERSIONS = {"java": ["8", "11", "17", "21"], "python": ["3.9", "3.10", "3.11", "3.12"]}

#: The worker that fits one category only: it requires a tag that one category asks for.
PICKY_WORKER = "w-picky-fpga"
PICKY_CATEGORY = "language: c; special: fpga; arch: ?x86_64"
#: The worker that fits no category at all.
NOTHING_WORKER = "w-picky-none"
SUBMITTER = "bench"
WORKER_BATCH = 500
CATEGORY_BATCH = 25
JOB_CHUNK = 20_000


def worker_profile(rng: random.Random) -> tuple[str, int, tuple[QueueSpec, ...]]:
    """One machine profile: (Momotor definition, slots, queues)."""
    groups: list[str] = []
    languages = rng.sample(LANGUAGES, rng.randint(2, 5))
    items = [f"?{lang}" for lang in languages]
    if rng.random() < 0.05:
        # Some images refuse a language outright (a worker-side exclusion).
        refused = rng.choice([lang for lang in LANGUAGES if lang not in languages])
        items.append(f"~{refused}")
    groups.append("language: " + ", ".join(items))
    for language, versions in VERSIONS.items():
        if language in languages:
            offered = rng.sample(versions, rng.randint(1, 3))
            groups.append(f"{language}: " + ", ".join(f"?{v}" for v in offered))
    groups.append("arch: ?" + rng.choices(["x86_64", "aarch64"], weights=[8, 2])[0])
    groups.append("os: ?" + rng.choices(["linux", "windows", "macos"], weights=[8, 1, 1])[0])
    gpu = rng.random()
    if gpu < 0.10:
        groups.append("gpu: cuda")  # a dedicated GPU node: only jobs that ask for CUDA
    elif gpu < 0.15:
        groups.append("gpu: ?rocm")
    rng.shuffle(groups)
    slots = rng.choices([1, 2, 4], weights=[5, 3, 2])[0]
    queues: tuple[QueueSpec, ...] = ()
    if rng.random() < 0.10:
        queues = (QueueSpec("default", slots), QueueSpec("long", 1))
    return "; ".join(groups), slots, queues


def category_definition(rng: random.Random) -> tuple[str, int]:
    """One job request: (Momotor definition, slots)."""
    language = rng.choices(LANGUAGES, weights=LANGUAGE_WEIGHTS)[0]
    groups = [f"language: {language}"]
    if language in VERSIONS and rng.random() < 0.7:
        groups.append(f"{language}: {rng.choice(VERSIONS[language])}")
    arch = rng.random()
    if arch < 0.30:
        groups.append("arch: ?x86_64")
    elif arch < 0.45:
        groups.append("arch: x86_64")
    elif arch < 0.50:
        groups.append("arch: aarch64")
    gpu = rng.random()
    if gpu < 0.12:
        groups.append("gpu: cuda")
    elif gpu < 0.15:
        groups.append("gpu: rocm")
    elif gpu < 0.20:
        groups.append("gpu: ~cuda")
    system = rng.random()
    if system < 0.20:
        groups.append("os: linux")
    elif system < 0.30:
        groups.append("os: ~windows")
    elif system < 0.35:
        groups.append("os: ?windows")
    rng.shuffle(groups)
    slots = rng.choices([1, 2, 4], weights=[80, 15, 5])[0]
    return "; ".join(groups), slots


@dataclass
class CategoryInfo:
    id: int
    resources: str
    slots: int
    #: Share of the waiting jobs (Zipf-like: a few categories hold most jobs).
    weight: float
    jobs: int = 0


@dataclass
class Dataset:
    workers: list[str] = field(default_factory=list)
    #: Workers copied from their profile's first worker (see build_workers).
    cloned: list[str] = field(default_factory=list)
    registered: int = 0
    #: Active workers with ordinary profiles: the ones the pull measurements use.
    pullers: list[str] = field(default_factory=list)
    categories: list[CategoryInfo] = field(default_factory=list)
    rejected_definitions: int = 0
    waiting: int = 0
    clock: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    timings: dict[str, float] = field(default_factory=dict)


def build_workers(
    database: Database, rng: random.Random, count: int, data: Dataset, *, register_all: bool
) -> None:
    """Create ``count`` workers (two of them the picky ones).

    The first worker of each machine profile, and the picky ones, are registered through
    ``upsert_worker``. With ``register_all`` every worker is; otherwise the others are
    copies of their profile's first worker made with bulk INSERTs of the rows
    ``upsert_worker`` wrote for it (worker, queue instances, tag rows). That is the same
    database state, because no category exists yet, so no misfit row is owed;
    :func:`verify_clones` checks it once the categories exist.
    """
    started = time.perf_counter()
    profiles = [worker_profile(rng) for _ in range(max(20, count // 25))]
    specs: list[WorkerSpec] = [
        WorkerSpec(PICKY_WORKER, "special: fpga; language: ?c, ?rust; arch: ?x86_64", slots=1),
        WorkerSpec(NOTHING_WORKER, "special: quantum; language: ?c", slots=1),
    ]
    profile_of: dict[str, int] = {}
    for n in range(count - len(specs)):
        index = rng.randrange(len(profiles))
        resources, slots, queues = profiles[index]
        state = rng.choices(
            [WorkerState.ACTIVE, WorkerState.DRAINING, WorkerState.OFFLINE], weights=[97, 2, 1]
        )[0]
        name = f"w{n:06d}"
        profile_of[name] = index
        specs.append(WorkerSpec(name, resources, slots=slots, queues=queues, state=state))
    prototypes: dict[int, str] = {}
    registered, cloned = [], []
    for spec in specs:
        index = profile_of.get(spec.name, -1)
        if register_all or index < 0 or index not in prototypes:
            if index >= 0:
                prototypes[index] = spec.name
            registered.append(spec)
        else:
            cloned.append((spec, prototypes[index]))
    for start in range(0, len(registered), WORKER_BATCH):
        with database.transaction() as session:
            for spec in registered[start : start + WORKER_BATCH]:
                upsert_worker(session, spec)
    data.timings["workers registered"] = time.perf_counter() - started
    if cloned:
        cloned_at = time.perf_counter()
        _clone_workers(database, cloned)
        data.timings["workers copied"] = time.perf_counter() - cloned_at
    data.workers = [spec.name for spec in specs]
    data.cloned = [spec.name for spec, _ in cloned]
    data.pullers = [spec.name for spec in specs[2:] if spec.state is WorkerState.ACTIVE]
    data.registered = len(registered)


def _clone_workers(database: Database, clones: list[tuple[WorkerSpec, str]]) -> None:
    with database.transaction() as session:
        prototype_names = sorted({prototype for _, prototype in clones})
        ids = dict(
            session.execute(
                select(Worker.name, Worker.id).where(Worker.name.in_(prototype_names))
            ).all()
        )
        queues: dict[int, list[tuple[int, int]]] = {}
        for worker_id, queue_id, slots in session.execute(
            select(QueueInstance.worker_id, QueueInstance.queue_id, QueueInstance.slots)
            .where(QueueInstance.worker_id.in_(ids.values()))
            .order_by(QueueInstance.id)
        ):
            queues.setdefault(worker_id, []).append((queue_id, slots))
        tags: dict[int, list[tuple[str, str, str]]] = {}
        for worker_id, group, value, mode in session.execute(
            select(WorkerTag.worker_id, WorkerTag.group_name, WorkerTag.value, WorkerTag.mode)
            .where(WorkerTag.worker_id.in_(ids.values()))
            .order_by(WorkerTag.id)
        ):
            tags.setdefault(worker_id, []).append((group, value, mode))
        now = datetime.now(UTC)
        session.execute(
            insert(Worker),
            [
                {
                    "name": spec.name,
                    "state": spec.state,
                    "generation": 1,
                    "resources": spec.resources,
                    "created_at": now,
                    "updated_at": now,
                }
                for spec, _ in clones
            ],
        )
        new_ids = dict(
            session.execute(
                select(Worker.name, Worker.id).where(
                    Worker.name.in_([spec.name for spec, _ in clones])
                )
            ).all()
        )
        queue_rows, tag_rows = [], []
        for spec, prototype in clones:
            worker_id, source = new_ids[spec.name], ids[prototype]
            queue_rows += [
                {"worker_id": worker_id, "queue_id": q, "slots": n, "used_slots": 0}
                for q, n in queues[source]
            ]
            tag_rows += [
                {"worker_id": worker_id, "group_name": g, "value": v, "mode": m}
                for g, v, m in tags.get(source, [])
            ]
        session.execute(insert(QueueInstance), queue_rows)
        if tag_rows:
            session.execute(insert(WorkerTag), tag_rows)


def verify_clones(database: Database, names: Sequence[str]) -> int:
    """Recompute the misfit rows of some copied workers with the real code and compare them
    with the rows the categories wrote for them; raise on a difference. Rolled back."""
    checked = 0
    try:
        with database.transaction() as session:
            for name in names:
                worker_id = session.scalar(select(Worker.id).where(Worker.name == name))
                assert worker_id is not None
                misfit_rows = (
                    select(CategoryMisfit.category_id, CategoryMisfit.reason)
                    .where(CategoryMisfit.worker_id == worker_id)
                    .order_by(CategoryMisfit.category_id)
                )
                fit_rows = (
                    select(CategoryFit.category_id)
                    .where(CategoryFit.worker_id == worker_id)
                    .order_by(CategoryFit.category_id)
                )
                before = (session.execute(misfit_rows).all(), session.execute(fit_rows).all())
                recache_worker_misfits(session, worker_id)
                after = (session.execute(misfit_rows).all(), session.execute(fit_rows).all())
                if before != after:
                    raise RuntimeError(f"copied worker {name}: cache rows differ from a recache")
                checked += 1
            raise _Rollback
    except _Rollback:
        pass
    return checked


class _Rollback(Exception):
    pass


def build_categories(database: Database, rng: random.Random, count: int, data: Dataset) -> None:
    """Create ``count`` distinct categories, each by submitting its first job.

    A drawn definition that repeats an existing category or that no worker fits (the job
    is stored failed, "No suitable worker found") is replaced by another draw.
    """
    started = time.perf_counter()
    seen: set[int] = set()
    wanted = [(PICKY_CATEGORY, 1)]
    attempts = 0
    while len(data.categories) < count:
        attempts += 1
        if attempts > count * 50:
            raise RuntimeError(f"could not draw {count} distinct runnable categories")
        batch = wanted or [category_definition(rng) for _ in range(CATEGORY_BATCH)]
        wanted = []
        with database.transaction() as session:
            for resources, slots in batch:
                if len(data.categories) >= count:
                    break
                job = submit_job(
                    session,
                    JobSpec(resources=resources, priority=_priority(rng), slots=slots),
                    submitter=SUBMITTER,
                )
                job.submitted_at = data.clock
                data.clock += timedelta(milliseconds=10)
                if job.state is not JobState.WAITING:
                    data.rejected_definitions += 1
                    continue
                if job.category_id in seen:
                    # Same request as an earlier category: an ordinary extra waiting job.
                    data.waiting += 1
                    _category(data, job.category_id).jobs += 1
                    continue
                seen.add(job.category_id)
                data.categories.append(CategoryInfo(job.category_id, resources, slots, 0.0, 1))
                data.waiting += 1
    # Zipf-like shares in a shuffled order; the picky category gets an ordinary share.
    ranks = list(range(len(data.categories)))
    rng.shuffle(ranks)
    total = sum(1 / (rank + 1) ** 0.8 for rank in ranks)
    for info, rank in zip(data.categories, ranks, strict=True):
        info.weight = 1 / (rank + 1) ** 0.8 / total
    data.timings["categories"] = time.perf_counter() - started


def _category(data: Dataset, category_id: int) -> CategoryInfo:
    for info in data.categories:
        if info.id == category_id:
            return info
    raise KeyError(category_id)


def _priority(rng: random.Random) -> int:
    return rng.choices([0, 1, 5, -1], weights=[85, 8, 2, 5])[0]


def grow_jobs(database: Database, rng: random.Random, total: int, data: Dataset) -> float:
    """Bulk-insert waiting jobs until about ``total`` wait, spread over the categories by
    their shares (every category keeps at least a few). Returns the seconds it took."""
    started = time.perf_counter()
    rows: list[dict[str, object]] = []
    for info in data.categories:
        target = max(5, round(total * info.weight))
        for _ in range(target - info.jobs):
            rows.append(
                {
                    "state": JobState.WAITING,
                    "priority": _priority(rng),
                    "slots": info.slots,
                    "category_id": info.id,
                    "resources": info.resources,
                    "submitter": SUBMITTER,
                    "submitted_at": data.clock,
                }
            )
            data.clock += timedelta(milliseconds=10)
        info.jobs = max(info.jobs, target)
    # Interleave categories, as submissions arrive, and keep submitted_at increasing.
    rng.shuffle(rows)
    stamps = sorted(row["submitted_at"] for row in rows)  # type: ignore[type-var]
    for row, stamp in zip(rows, stamps, strict=True):
        row["submitted_at"] = stamp
    table = cast(Table, Job.__table__)
    for start in range(0, len(rows), JOB_CHUNK):
        with database.engine.begin() as connection:
            connection.execute(insert(table), rows[start : start + JOB_CHUNK])
    data.waiting += len(rows)
    return time.perf_counter() - started


def category_ids(database: Database) -> Sequence[int]:
    with database.transaction(write=False) as session:
        return list(session.scalars(select(Category.id).order_by(Category.id)))
