"""A running job's output, streamed by its worker in chunks and read back by offset.

The server keeps only a bounded tail per job (``JOBMATCH_OUTPUT_TAIL_CHARS``); offsets stay
absolute, so a reader that fell behind learns how much it missed. A chunk names the offset
it starts at, which makes a resend harmless: the part the server already has is skipped.
A chunk that starts past the end (the worker dropped text it could not send) restarts the
tail at its own offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Job, JobOutput
from app.matching.dispatch.pull import running_on
from app.matching.locks import worker_by_name


@dataclass(frozen=True)
class OutputSlice:
    """Text from ``offset`` (the first character still kept at or after the offset asked
    for) up to ``next_offset``; ``missed`` characters between the two were dropped."""

    offset: int
    text: str
    next_offset: int
    missed: int


def append_output(
    session: Session, job_id: int, worker_name: str, offset: int, text: str, tail_chars: int
) -> int:
    """Add ``text`` (which starts at ``offset`` of the job's output) to the tail kept for the
    job running on ``worker_name``; returns the offset the next chunk starts at."""
    worker = worker_by_name(session, worker_name)
    job = running_on(session.get(Job, job_id, with_for_update=True), job_id, worker)
    kept = session.get(JobOutput, job_id, with_for_update=True)
    if kept is None:
        kept = JobOutput(job_id=job_id, attempt=job.attempts, start=0, text="")
        session.add(kept)
    elif kept.attempt != job.attempts:
        kept.attempt, kept.start, kept.text = job.attempts, 0, ""
    end = kept.start + len(kept.text)
    if offset > end:
        kept.start, kept.text = offset, ""
        end = offset
    new = text[end - offset :]
    if new:
        whole = kept.text + new
        dropped = max(len(whole) - tail_chars, 0)
        kept.start, kept.text = kept.start + dropped, whole[dropped:]
        kept.updated_at = utcnow()
    session.flush()
    return kept.start + len(kept.text)


def read_output(session: Session, job: Job, offset: int) -> OutputSlice:
    """The job's current attempt's output from ``offset`` on (empty past its end)."""
    kept = session.get(JobOutput, job.id)
    if kept is None or kept.attempt != job.attempts:
        return OutputSlice(offset=0, text="", next_offset=0, missed=0)
    end = kept.start + len(kept.text)
    start = min(max(offset, kept.start), end)
    return OutputSlice(
        offset=start,
        text=kept.text[start - kept.start :],
        next_offset=end,
        missed=max(kept.start - offset, 0),
    )
