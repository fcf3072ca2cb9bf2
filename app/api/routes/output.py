"""A running job's output: its worker appends chunks, submitters read from an offset."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.api.auth import SubmitterDep, WorkerDep
from app.api.deps import SessionDep
from app.api.responses import BODY_ERRORS, errors
from app.api.retries import RetryingRoute
from app.api.routes.jobs import visible_job
from app.api.schemas.common import IdPath, NamePath
from app.api.schemas.output import OutputAppended, OutputChunkIn, OutputOut
from app.matching import output

router = APIRouter(prefix="/v1", tags=["jobs"], route_class=RetryingRoute)


@router.post(
    "/workers/{name}/jobs/{job_id}/output",
    operation_id="append_job_output",
    summary="Append a chunk of a running job's output",
    responses=errors(401, 403, 404, 409, 503, *BODY_ERRORS),
)
def append_output(
    name: NamePath,
    job_id: IdPath,
    body: OutputChunkIn,
    request: Request,
    session: SessionDep,
    _worker: WorkerDep,
) -> OutputAppended:
    """The worker running the job sends the next chunk of its output. The server keeps the
    last ``JOBMATCH_OUTPUT_TAIL_CHARS`` characters; text it already has (a resend) is
    skipped, so the chunk may be sent again after a lost answer."""
    tail: int = request.app.state.settings.output_tail_chars
    next_offset = output.append_output(session, job_id, name, body.offset, body.text, tail)
    return OutputAppended(job=job_id, next_offset=next_offset)


@router.get(
    "/jobs/{job_id}/output",
    operation_id="get_job_output",
    summary="Read a job's streamed output from an offset",
    responses=errors(401, 403, 404, 422, 503),
)
def read_output(
    job_id: IdPath,
    session: SessionDep,
    principal: SubmitterDep,
    offset: Annotated[int, Query(ge=0, le=2**62, description="first character wanted")] = 0,
) -> OutputOut:
    """The output the job's worker streamed so far (its current attempt), from ``offset``;
    ask again from ``next_offset`` for more. While the job runs this grows; once it ended,
    the job's ``output`` field holds what the worker reported with its end."""
    job = visible_job(session, job_id, principal)
    found = output.read_output(session, job, offset)
    return OutputOut(
        job=job_id,
        offset=found.offset,
        text=found.text,
        next_offset=found.next_offset,
        missed=found.missed,
    )
