"""Candidates and strengths from SQL + Python equal a pure-Python reference
(Resources.match over every worker) on generated clusters, on both databases."""

from __future__ import annotations

import math

import pytest

from app.db.engine import Database
from app.matching import candidates, submission, workers
from app.matching.explain import slot_clauses, tag_clauses
from app.matching.submission import JobSpec
from app.matching.workers import WorkerSpec
from app.notations.momotor.resources import Resources
from app.notations.momotor.strengths import NoMatch
from tests.support.clusters import cluster


def reference(
    job: str, slots: int, cluster_workers: list[tuple[str, str, int]]
) -> dict[str, float]:
    task = Resources.from_string(job)
    result = {}
    for name, definition, capacity in cluster_workers:
        if capacity < slots:
            continue
        try:
            result[name] = task.match(Resources.from_string(definition))
        except NoMatch:
            continue
    return result


@pytest.mark.parametrize("seed", range(6))
def test_candidates_equal_reference(database: Database, seed: int) -> None:
    cluster_workers, jobs = cluster(seed, workers=15, jobs=40)
    with database.transaction() as session:
        for name, definition, slots in cluster_workers:
            workers.upsert_worker(session, WorkerSpec(name=name, resources=definition, slots=slots))
        for definition, slots, priority in jobs:
            job = submission.submit_job(
                session,
                JobSpec(resources=definition, slots=slots, priority=priority),
                submitter="t",
            )
            expected = reference(definition, slots, cluster_workers)
            got = {c.worker: c.strength for c in candidates.job_candidates(session, job)}
            assert got == expected, definition
            strengths = [got[name] for name in got]
            assert strengths == sorted(strengths)
            assert (job.state.value == "failed") == (not expected)


@pytest.mark.parametrize("seed", range(3))
def test_explanations_agree_with_sql(database: Database, seed: int) -> None:
    """A worker is eligible exactly when the explanation lists no failing clause, and the
    SQL reason code is the first clause's code."""
    cluster_workers, jobs = cluster(100 + seed, workers=10, jobs=25)
    with database.transaction() as session:
        for name, definition, slots in cluster_workers:
            workers.upsert_worker(session, WorkerSpec(name=name, resources=definition, slots=slots))
        for definition, slots, _priority in jobs:
            job = submission.submit_job(
                session, JobSpec(resources=definition, slots=slots), submitter="t"
            )
            eligible = {c.worker for c in candidates.job_candidates(session, job)}
            for explanation in candidates.explain_job(session, job):
                assert explanation.eligible == (explanation.worker in eligible)
                if explanation.clauses:
                    codes = {c.reason for c in explanation.clauses}
                    assert explanation.misfit_reason in codes
                else:
                    assert explanation.misfit_reason is None


def test_reference_clauses_cover_every_nomatch() -> None:
    """The pure explanation finds a clause exactly when Momotor says NoMatch."""
    cluster_workers, jobs = cluster(7, workers=30, jobs=60)
    for definition, _slots, _priority in jobs:
        task = Resources.from_string(definition)
        for _name, worker_definition, _capacity in cluster_workers:
            worker = Resources.from_string(worker_definition)
            try:
                strength = task.match(worker)
            except NoMatch:
                strength = None
            assert (strength is None) == bool(tag_clauses(task, worker))
            assert strength is None or not math.isnan(strength)
    assert slot_clauses(2, 1) and not slot_clauses(2, 2)
