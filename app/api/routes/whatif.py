"""What-if over the live cluster: ``POST /v1/whatif`` (issue 24)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy.orm import Session

from app.api.auth import AdminDep
from app.api.deps import SessionDep
from app.api.problems import ProblemError
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.routes.workers import patch_changes, worker_spec
from app.api.schemas.whatif import (
    AddedJobOut,
    CandidatesChangeOut,
    CategoryCountsOut,
    FirstPullOut,
    WhatIfIn,
    WhatIfOut,
)
from app.matching.errors import InvalidFieldError
from app.matching.whatif.changes import (
    ChangeSet,
    GroupWeightChange,
    ValuesChange,
    WeightChange,
    WorkerChange,
)
from app.matching.whatif.run import Answer, what_if
from app.settings import Settings

router = APIRouter(prefix="/v1", tags=["what-if"], route_class=RetryingRoute)


def _check_limits(body: WhatIfIn, settings: Settings) -> None:
    """The configured sizes of a change set, before any work."""
    problems = []
    workers = (
        len(body.add_workers)
        + len(body.change_workers)
        + len(body.drain_workers)
        + len(body.remove_workers)
        + len(body.pull_workers)
    )
    if workers > settings.whatif_max_workers:
        problems.append(
            {
                "field": "body.add_workers",
                "message": f"{workers} worker items (added, changed, drained, removed and "
                "pulling); "
                f"at most {settings.whatif_max_workers} (JOBMATCH_WHATIF_MAX_WORKERS)",
                "type": "too_long",
            }
        )
    if len(body.add_jobs) > settings.whatif_max_jobs:
        problems.append(
            {
                "field": "body.add_jobs",
                "message": f"{len(body.add_jobs)} jobs; at most {settings.whatif_max_jobs} "
                "(JOBMATCH_WHATIF_MAX_JOBS)",
                "type": "too_long",
            }
        )
    if problems:
        summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        raise ProblemError(
            422, f"the change set is too large: {summary}", title="Invalid request", errors=problems
        )
    for index, job in enumerate(body.add_jobs):
        if job.tasks is not None or job.task_concurrency is not None:
            # One added job per body: an array's tasks would be missing, not modelled.
            raise InvalidFieldError(
                f"add_jobs.{index}.{'tasks' if job.tasks is not None else 'task_concurrency'}",
                "a what-if adds single jobs; array jobs (qsub -t, -tc) are not modelled",
            )


def _change_set(body: WhatIfIn) -> ChangeSet:
    return ChangeSet(
        add_workers=tuple(worker_spec(w) for w in body.add_workers),
        change_workers=tuple(WorkerChange(c.name, patch_changes(c)) for c in body.change_workers),
        set_values=tuple(
            ValuesChange(v.level, v.host, v.queue, v.by_kind()) for v in body.set_values
        ),
        add_quota_sets=tuple(q.text for q in body.add_quota_sets),
        replace_quota_sets=tuple(q.text for q in body.replace_quota_sets),
        remove_quota_sets=tuple(body.remove_quota_sets),
        set_weights=tuple(
            # As the route: a body without `group` leaves the submitter where it is.
            WeightChange(w.submitter, w.weight, w.group, moves="group" in w.model_fields_set)
            for w in body.set_weights
        ),
        set_group_weights=tuple(
            GroupWeightChange(g.group, g.weight) for g in body.set_group_weights
        ),
        drain_workers=tuple(body.drain_workers),
        remove_workers=tuple(body.remove_workers),
        add_jobs=tuple(j.spec() for j in body.add_jobs),
        explain_job=body.explain_job,
        pull_workers=tuple(body.pull_workers),
    )


def _answer_out(answer: Answer) -> WhatIfOut:
    """The service's answer as the API says it (its dataclasses read by attribute)."""
    explained = answer.explained
    return WhatIfOut(
        runnable_now=answer.runnable_now,
        no_longer_runnable=answer.no_longer_runnable,
        categories=[
            CategoryCountsOut.model_validate(c, from_attributes=True) for c in answer.categories
        ],
        added_jobs=[AddedJobOut.model_validate(j, from_attributes=True) for j in answer.added_jobs],
        requeued=answer.requeued,
        first_pulls=[
            FirstPullOut.model_validate(p, from_attributes=True) for p in answer.first_pulls
        ],
        explain_job=CandidatesChangeOut.model_validate(explained, from_attributes=True)
        if explained is not None
        else None,
    )


@router.post(
    "/whatif",
    operation_id="what_if",
    summary="What a change of workers and jobs would change, without storing it",
    responses=errors(401, 403, 409, 503, *BODY_ERRORS),
)
def whatif(body: WhatIfIn, request: Request, session: SessionDep, admin: AdminDep) -> WhatIfOut:
    """Apply the change set with the services of the real routes inside a savepoint,
    read what the real queries say then, and roll the savepoint back: which waiting jobs
    some worker could take after the change and not before (and the reverse), per
    category how many, the candidates of `explain_job` before and after, and the job each
    added or changed worker would get if it pulled first. Nothing is stored and nothing
    is announced to waiting pulls; the ids of added jobs are provisional. A refused item
    is a 422 naming it (`body.add_jobs.3.resources`). On PostgreSQL it holds, until it
    answers, the row locks of the workers it changes and the lock that orders changes of
    the misfit cache (docs/whatif.md)."""
    return answer_for(session, body, request.app.state.settings, by=admin.subject)


def answer_for(session: Session, body: WhatIfIn, settings: Settings, *, by: str) -> WhatIfOut:
    """The what-if of a validated body, for the API and the console: its limits checked
    before any work (ProblemError), a refused item raised as the service raises it."""
    _check_limits(body, settings)
    return _answer_out(what_if(session, _change_set(body), settings.allocation_policy, by=by))
