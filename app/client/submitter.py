"""The submitter's client: submit jobs in any notation, follow and explain them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.client import operations as ops
from app.client.base import IDEMPOTENCY_KEY, BaseClient
from app.client.models import (
    Allocation,
    Attribute,
    AttributePage,
    Candidates,
    Category,
    CategoryPage,
    Explanation,
    Job,
    JobHistory,
    JobOutput,
    JobPage,
    JobState,
    ParallelEnvironment,
    PePage,
    SubmittedJobs,
    Worker,
    WorkerPage,
)
from app.client.operations import covers
from app.client.parsing import to_json
from app.client.requests import JobSpec
from app.wire.values import Values


class SubmitterClient(BaseClient):
    """What a submitter token may do (an admin token may do it too, for every submitter)."""

    @covers(ops.SUBMIT_JOB)
    def submit_job(self, job: JobSpec, *, idempotency_key: str | None = None) -> Job:
        """Submit a job. It always carries an Idempotency-Key (a fresh one unless given), so
        a retry after a lost answer returns the same job instead of submitting it twice."""
        key = idempotency_key or self.new_idempotency_key()
        return self._call(Job, ops.SUBMIT_JOB, body=job, headers={IDEMPOTENCY_KEY: key})

    @covers(ops.SUBMIT_JOBS)
    def submit_jobs(
        self,
        jobs: Sequence[JobSpec | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> SubmittedJobs:
        """Submit many jobs in one request (POST /v1/jobs/bulk): all are stored or, when
        one body is refused (InvalidRequest naming it, ``body.jobs.3.resources``), none.
        A body with ``tasks`` is an array job, one job per task. It always carries an
        Idempotency-Key (a fresh one unless given), so a retry after a lost answer returns
        the jobs the first attempt stored instead of storing them twice."""
        bodies = [dict(job) if isinstance(job, Mapping) else to_json(job) for job in jobs]
        key = idempotency_key or self.new_idempotency_key()
        return self._call(
            SubmittedJobs, ops.SUBMIT_JOBS, body={"jobs": bodies}, headers={IDEMPOTENCY_KEY: key}
        )

    @covers(ops.LIST_JOBS)
    def list_jobs(
        self,
        *,
        state: JobState | str | None = None,
        category: int | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> JobPage:
        """One page of jobs in id order, filtered by state and category (a submitter sees
        its own, every page full)."""
        return self._page(JobPage, ops.LIST_JOBS, limit, offset, state=state, category=category)

    @covers(ops.GET_JOB)
    def get_job(self, job_id: int) -> Job:
        return self._call(Job, ops.GET_JOB, path={"job_id": job_id})

    @covers(ops.JOB_OUTPUT)
    def job_output(self, job_id: int, *, offset: int = 0) -> JobOutput:
        """What the job printed so far from ``offset`` (characters); ask again from the
        answer's ``next_offset`` to follow it while it runs."""
        query = {"offset": offset}
        return self._call(JobOutput, ops.JOB_OUTPUT, path={"job_id": job_id}, query=query)

    @covers(ops.CANCEL_JOB)
    def cancel_job(self, job_id: int) -> Job:
        """Cancel a waiting or running job (Conflict when it has already ended)."""
        return self._call(Job, ops.CANCEL_JOB, path={"job_id": job_id})

    @covers(ops.JOB_CANDIDATES)
    def job_candidates(self, job_id: int) -> Candidates:
        """The workers that could run the job, strongest first."""
        return self._call(Candidates, ops.JOB_CANDIDATES, path={"job_id": job_id})

    @covers(ops.EXPLAIN_JOB)
    def explain_job(self, job_id: int, *, worker: str | None = None) -> Explanation:
        """Why each worker (or only ``worker``) can or cannot run the job."""
        return self._call(
            Explanation, ops.EXPLAIN_JOB, path={"job_id": job_id}, query={"worker": worker}
        )

    @covers(ops.JOB_HISTORY)
    def job_history(self, job_id: int) -> JobHistory:
        """Every state change of the job, oldest first."""
        return self._call(JobHistory, ops.JOB_HISTORY, path={"job_id": job_id})

    @covers(ops.JOB_ALLOCATION)
    def job_allocation(self, job_id: int) -> Allocation:
        """The inventory resources the job holds (RFC 20 R_lite)."""
        return self._call(Allocation, ops.JOB_ALLOCATION, path={"job_id": job_id})

    @covers(ops.MATCH)
    def match(self, job: JobSpec) -> Candidates:
        """The workers that could run ``job``, without submitting it."""
        return self._call(Candidates, ops.MATCH, body=job)

    @covers(ops.LIST_WORKERS)
    def list_workers(self, *, limit: int | None = None, offset: int | None = None) -> WorkerPage:
        return self._page(WorkerPage, ops.LIST_WORKERS, limit, offset)

    @covers(ops.GET_WORKER)
    def get_worker(self, name: str) -> Worker:
        return self._call(Worker, ops.GET_WORKER, path={"name": name})

    @covers(ops.LIST_ATTRIBUTES)
    def list_attributes(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> AttributePage:
        """The Grid Engine complex, a page at a time: the attributes a -l request may name."""
        return self._page(AttributePage, ops.LIST_ATTRIBUTES, limit, offset)

    @covers(ops.GET_ATTRIBUTE)
    def get_attribute(self, name: str) -> Attribute:
        return self._call(Attribute, ops.GET_ATTRIBUTE, path={"name": name})

    @covers(ops.LIST_PES)
    def list_pes(self, *, limit: int | None = None, offset: int | None = None) -> PePage:
        """The Grid Engine parallel environments, a page at a time."""
        return self._page(PePage, ops.LIST_PES, limit, offset)

    @covers(ops.GET_PE)
    def get_pe(self, name: str) -> ParallelEnvironment:
        return self._call(ParallelEnvironment, ops.GET_PE, path={"name": name})

    # -- Grid Engine values ----------------------------------------------------------------

    @covers(ops.GET_GLOBAL_VALUES)
    def get_global_values(self) -> Values:
        """The global host's values and its consumables' use."""
        return self._call(Values, ops.GET_GLOBAL_VALUES)

    @covers(ops.GET_HOST_VALUES)
    def get_host_values(self, host: str) -> Values:
        """A host's complex and load values and its consumables' use."""
        return self._call(Values, ops.GET_HOST_VALUES, path={"host": host})

    @covers(ops.GET_QUEUE_VALUES)
    def get_queue_values(self, queue: str, host: str) -> Values:
        """The values of the queue instance ``queue@host``."""
        return self._call(Values, ops.GET_QUEUE_VALUES, path={"queue": queue, "host": host})

    # -- categories ------------------------------------------------------------------------

    @covers(ops.LIST_CATEGORIES)
    def list_categories(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> CategoryPage:
        """Job categories with their requests and counts, a page at a time."""
        return self._page(CategoryPage, ops.LIST_CATEGORIES, limit, offset)

    @covers(ops.GET_CATEGORY)
    def get_category(self, category_id: int) -> Category:
        """A category and its fit over every worker (the reason code of each misfit)."""
        return self._call(Category, ops.GET_CATEGORY, path={"category_id": category_id})
