"""A small example cluster and job mix, for `jobmatch demo` and the README walk-through.

The Momotor documentation's worker and its six jobs are among them (its module documentation).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Job, Worker
from app.matching import candidates, submission, workers
from app.matching.candidates import Candidate, StaticExplanation
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from app.wire.queues import QueueSpec

DEMO_WORKERS = [
    WorkerSpec(
        name="docs-worker",
        resources="language: ?java, ?python\njava: ?8, ?11, ?12, ?13\npython: ?3.6, ?3.7",
        slots=2,
    ),
    WorkerSpec(
        name="java-box", resources="language: java, ?kotlin; java: ?17, ?21; arch: ?x86", slots=4
    ),
    WorkerSpec(name="arm-runner", resources="language: ?python, ?c; arch: ?arm, ~x86", slots=2),
    WorkerSpec(
        name="gpu-node",
        resources="language: ?python; gpu: cuda",  # takes only jobs that ask for CUDA
        queues=(QueueSpec("gpu", 1), QueueSpec("default", 2)),
    ),
]

DEMO_JOBS = [
    JobSpec("language: java\njava: 12"),
    JobSpec("language: java\njava: 14"),
    JobSpec("language: java\njava: ?14"),
    JobSpec("arch: x86"),
    JobSpec("arch: ?x86"),
    JobSpec("arch: ~x86"),
    JobSpec("language: python; gpu: cuda", priority=5),
    JobSpec("language: java; java: ?17", slots=3),
    JobSpec("language: c; arch: arm"),
]


@dataclass(frozen=True)
class DemoJob:
    job: Job
    candidates: list[Candidate]
    refusals: list[StaticExplanation]


#: Who the demo's jobs are submitted by.
DEMO_SUBMITTER = "demo"


def not_of_the_demo(session: Session) -> list[str]:
    """What the database holds that the demo did not put there, one phrase each (``worker
    w9``, ``3 jobs of others``): a database holding any is not the demo's own, and the
    demo must not start it afresh."""
    demo = {spec.name for spec in DEMO_WORKERS}
    workers_of_others = sorted(set(session.scalars(select(Worker.name))) - demo)
    jobs_of_others = session.scalar(
        select(func.count()).select_from(Job).where(Job.submitter != DEMO_SUBMITTER)
    )
    found = [f"worker {name}" for name in workers_of_others]
    if jobs_of_others:
        found.append(f"{jobs_of_others} job{'s' if jobs_of_others > 1 else ''} of others")
    return found


def load_demo(session: Session) -> list[DemoJob]:
    """Register the demo workers and submit the demo jobs; return what matching says."""
    for worker_spec in DEMO_WORKERS:
        workers.upsert_worker(session, worker_spec)
    report = []
    for job_spec in DEMO_JOBS:
        job = submission.submit_job(session, job_spec, submitter=DEMO_SUBMITTER)
        report.append(
            DemoJob(
                job=job,
                candidates=candidates.job_candidates(session, job),
                refusals=[e for e in candidates.explain_job(session, job) if not e.eligible],
            )
        )
    return report
