"""The parts of a job's explanation (``GET /v1/jobs/{id}/explain``) that the server builds
and the client reads as they are: a failing clause, one worker's verdict on the job, and
the summary in the style of ``condor_q -better-analyze``."""

from __future__ import annotations

from dataclasses import dataclass

from app.wire.states import WorkerState


@dataclass(frozen=True)
class Clause:
    """One failing clause: a reason code (as in category_misfits.reason) and a sentence;
    for a Momotor tag, its group and the job's tag as written (``group: tag``)."""

    reason: str
    message: str
    group: str | None = None
    tag: str | None = None


@dataclass(frozen=True)
class WorkerExplanation:
    """One worker against one job: ``eligible`` (it, and the set of registered workers,
    could ever hold it), ``can_run_now`` (its next pull, or an allocation now, starts the
    job; None for a job that does not wait), the failing clauses, the first one's code in
    ``reason``, and the ``answer`` for a waiting job: ``now``, ``outranked`` (it could
    run it, other jobs go first), ``not-now`` (room is taken, or the worker takes no work
    now) or ``never``."""

    worker: str
    state: WorkerState
    eligible: bool
    can_run_now: bool | None
    reason: str | None
    misfit_reason: str | None
    clauses: list[Clause]
    answer: str | None = None


@dataclass(frozen=True)
class ExplainSummary:
    """A waiting job's explanation in one place: how many workers were looked at, how
    many fit, can run it now, fit but do not run it now; per answer, how many could run
    it after other jobs (outranked), not now, never (these and ``can_run_now`` add up to
    ``workers``); per reason code, how many workers fail on it first; and the one change
    that would let the job run soonest, if there is one."""

    workers: int
    eligible: int
    can_run_now: int
    fit_but_busy: int
    first_failures: dict[str, int]
    suggestion: str | None
    #: Per answer (issue 35): with ``can_run_now`` they add up to ``workers``.
    outranked: int = 0
    not_now: int = 0
    never: int = 0
