"""The console's templates and what its pages show that no single service returns: the
rendering environment (Jinja2, from the package's own templates) and the job page's
assembly from the job, history, candidates, explain and allocation services."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape
from sqlalchemy.orm import Session

from app import __version__
from app.api.ui.session import CSRF_FIELD, Viewer
from app.db.models import Job, JobEvent, JobState
from app.matching import candidates, history, readiness
from app.matching import output as job_output
from app.matching.allocation import r as r_description
from app.matching.allocation.allocator import Policy
from app.matching.candidates import Candidate
from app.matching.console import command_text, reason_words, submitted_request
from app.matching.gridengine import explain as gridengine_explain
from app.wire.explanation import Clause, ExplainSummary, WorkerExplanation
from app.words import plural

#: Headers of every console page: never cached (they show live state and a CSRF token),
#: never framed (clickjacking of the admin buttons), no script or style from elsewhere.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago, in the largest two units: ``3m 12s``, ``2h 05m``, ``4d 01h``."""
    if moment is None:
        return "never"
    return duration(((now or datetime.now(UTC)) - moment).total_seconds())


def duration(seconds: float) -> str:
    """A length of time in its largest two units, as :func:`age` shows it."""
    days, rest = divmod(max(0, int(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, rest = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {rest:02d}s"
    return f"{rest}s"


def timestamp(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else "—"


def wrap_points(text: str) -> Markup:
    """The text, escaped, with its tokens kept whole: each run between spaces, split once
    more after each comma, is a ``<span class="tok">`` that does not wrap, and a ``<wbr>``
    follows a comma that no space follows. A long request then wraps between its items and
    at its spaces only, never inside ``node=3/slot/core=8`` or ``host:node[1-4]`` (which a
    browser would otherwise break after its hyphen)."""
    pieces = []
    for piece in _TOKENS.split(text):
        if not piece:
            continue
        if piece.isspace():
            pieces.append(escape(piece))
        else:
            pieces.append(Markup('<span class="tok">{}</span>').format(piece))
            if piece.endswith(","):
                pieces.append(Markup("<wbr>"))
    return Markup("").join(pieces)


#: Where :func:`wrap_points` splits: around runs of spaces, and after a comma.
_TOKENS = re.compile(r"(\s+)|(?<=,)(?=\S)")


def by_code(clauses: list[Clause]) -> list[tuple[str, list[str]]]:
    """A worker's failing clauses grouped by reason code, in the order each code first
    fails: the code is shown once, with the sentence of each of its clauses under it."""
    grouped: dict[str, list[str]] = {}
    for clause in clauses:
        grouped.setdefault(clause.reason, []).append(clause.message)
    return list(grouped.items())


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("app.api.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["age"] = age
    environment.filters["duration"] = duration
    environment.filters["timestamp"] = timestamp
    environment.filters["reason_words"] = reason_words
    environment.filters["wrap_points"] = wrap_points
    environment.filters["plural"] = plural
    environment.filters["by_code"] = by_code
    environment.globals["version"] = __version__
    environment.globals["csrf_field"] = CSRF_FIELD
    return environment


TEMPLATES = _environment()


def render(
    template: str, viewer: Viewer | None, *, status: int = 200, **context: Any
) -> HTMLResponse:
    """A console page: the template with the viewer (None on the sign-in page)."""
    page = TEMPLATES.get_template(template).render(viewer=viewer, **context)
    return HTMLResponse(page, status_code=status, headers=PAGE_HEADERS)


def error_page(viewer: Viewer | None, status: int, message: str) -> HTMLResponse:
    return render("error.html", viewer, status=status, status_code=status, message=message)


@dataclass(frozen=True)
class ReasonCount:
    code: str
    words: str
    workers: int


@dataclass(frozen=True)
class JobPage:
    """Everything the job page shows."""

    job: Job
    worker: str | None
    #: The request as submitted, in its notations: (what, text) pairs.
    request: list[tuple[str, str]]
    events: list[JobEvent]
    #: Ranked best first; None for a job that is not waiting (as GET .../candidates, 409).
    candidates: list[Candidate] | None
    #: Each worker against the job, as GET /v1/jobs/{id}/explain has it.
    verdicts: list[WorkerExplanation]
    #: The condor_q -better-analyze summary of a waiting job; None for any other.
    summary: ExplainSummary | None
    #: Grid Engine's scheduling lines for the job (qstat -j words).
    scheduling_info: list[str]
    allocation: list[dict[str, object]]
    #: What the job printed: streamed by its worker while it runs, as reported at its end
    #: once it ended (the server keeps a bounded tail of either).
    output: str
    #: Characters of a running job's output before the kept tail (0 when nothing is lost).
    output_missed: int

    @property
    def eligible(self) -> int:
        return sum(1 for v in self.verdicts if v.eligible)

    @property
    def first_failures(self) -> list[ReasonCount]:
        """How many workers fail on each code first, most first."""
        counts = Counter(v.reason for v in self.verdicts if v.reason is not None)
        return [ReasonCount(code, reason_words(code), n) for code, n in counts.most_common()]


def request_lines(job: Job) -> list[tuple[str, str]]:
    """The job's request field by field, as written (the notation named in each label),
    its command as a shell would take it, its slots and priority."""
    shown = [(part.label, part.text) for part in submitted_request(job)]
    command = command_text(job.command)
    if command is not None:
        shown.append(("command", command))
    shown.append(("slots", str(job.slots)))
    shown.append(("priority", str(job.priority)))
    return shown


def job_page(session: Session, job: Job, worker: str | None, policy: Policy) -> JobPage:
    lines = gridengine_explain.scheduling_info(session, job)
    verdicts, summary = readiness.explain_workers(session, job, None, policy, lines)
    return JobPage(
        job=job,
        worker=worker,
        request=request_lines(job),
        events=history.events(session, job.id),
        candidates=candidates.job_candidates(session, job)
        if job.state is JobState.WAITING
        else None,
        verdicts=verdicts,
        summary=summary,
        scheduling_info=lines,
        allocation=r_description.booked_r(session, job.id),
        **_output_of(session, job),
    )


def _output_of(session: Session, job: Job) -> dict[str, Any]:
    """A running job's streamed output (the API's GET /v1/jobs/{id}/output from 0), or
    the output an ended job reported."""
    if job.state is JobState.RUNNING:
        streamed = job_output.read_output(session, job, 0)
        return {"output": streamed.text, "output_missed": streamed.missed}
    return {"output": job.output or "", "output_missed": 0}
