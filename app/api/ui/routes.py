"""The web console under /ui: server-rendered pages over the read services of
app/matching/console.py, three admin actions (drain, resume, cancel) as plain forms,
the admin's what-if form (POST /v1/whatif's service, nothing stored) and the admin's
Demand page (GET /v1/demand's answer).

Not part of the OpenAPI document (include_in_schema=False): these are pages, not API. Each
page resolves its viewer from the session cookie (app/api/ui/session.py); without one it
sends the browser to the sign-in page. No SQL here: services read and write.
"""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.api.paging import Paging50Dep
from app.api.retries import Handler, RetryingRoute
from app.api.schemas.common import IdPath, NamePath
from app.api.ui import session as console_session
from app.api.ui import whatif_form
from app.api.ui.demand_page import demand_page
from app.api.ui.session import (
    BadFormError,
    Viewer,
    csrf_ok,
    current_viewer,
    form_fields,
    same_origin,
)
from app.api.ui.views import error_page, job_page, render
from app.db.models import JobState, WorkerState
from app.matching import console, submission, worker_lifecycle
from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.locks import worker_by_name
from app.matching.ordering import policy as ordering_policy
from app.matching.ordering import shares as fair_shares
from app.matching.worker_lifecycle import WorkerChanges


class SignInRequired(Exception):
    """A console page was asked for without a valid session: the browser is sent to the
    sign-in page."""


#: Where :func:`signed_in` leaves the viewer, for the error pages of :class:`ConsoleRoute`.
VIEWER_STATE = "console_viewer"


class ConsoleRoute(RetryingRoute):
    """A console route: retried as every route is, and its refusals shown as pages (a
    missing session goes to the sign-in page, a missing worker or job is a 404 page, a
    change the state forbids a 409 page, a malformed form a 422 page) instead of
    problem+json."""

    def get_route_handler(self) -> Handler:
        handle = super().get_route_handler()

        async def pages(request: Request) -> Response:
            try:
                return await handle(request)
            except SignInRequired:
                return _see_other(SIGN_IN)
            except BadFormError as bad:
                return error_page(getattr(request.state, VIEWER_STATE, None), 422, str(bad))
            except (NotFoundError, ConflictError) as refused:
                viewer = getattr(request.state, VIEWER_STATE, None)
                code = 404 if isinstance(refused, NotFoundError) else 409
                return error_page(viewer, code, str(refused))

        return pages


router = APIRouter(prefix="/ui", include_in_schema=False, route_class=ConsoleRoute)

FormDep = Annotated[dict[str, str], Depends(form_fields)]

SIGN_IN = "/ui/sign-in"

#: The longest reason a drain form takes, as PATCH /v1/workers/{name} (its schema's Reason).
MAX_REASON_LENGTH = 1024

#: The files of app/api/ui/static the console serves, with their media types.
STATIC_FILES = {"console.css": "text/css; charset=utf-8"}


def signed_in(request: Request, session: SessionDep) -> Viewer:
    """The viewer of a console page; without a valid session, the sign-in page."""
    viewer = current_viewer(request, session)
    if viewer is None:
        raise SignInRequired
    setattr(request.state, VIEWER_STATE, viewer)
    return viewer


ViewerDep = Annotated[Viewer, Depends(signed_in)]


def _see_other(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=status.HTTP_303_SEE_OTHER)


def _now() -> datetime:
    return datetime.now(UTC)


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    """A stylesheet shipped in the package (no CDN)."""
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        return Response("no such file", status_code=404, media_type="text/plain")
    content = resources.files("app.api.ui").joinpath("static", name).read_bytes()
    return Response(content, media_type=media_type, headers={"Cache-Control": "max-age=3600"})


@router.get("/sign-in")
def sign_in_page(request: Request, session: SessionDep) -> Response:
    if current_viewer(request, session) is not None:
        return _see_other("/ui")
    return render("sign_in.html", None, message=None)


@router.post("/sign-in")
def sign_in(request: Request, session: SessionDep, fields: FormDep) -> Response:
    """Check the pasted token against the admin token and the token table, and start a
    session (its id, not the token, goes in the cookie)."""
    if not same_origin(request):
        return error_page(None, 403, "sign-in refused: the form came from elsewhere")
    token = fields.get("token", "").strip()
    principal = console_session.principal_for_token(request, session, token)
    if principal is None:
        message = (
            "That token is unknown, revoked, or a worker's: paste an admin or submitter token."
        )
        return render("sign_in.html", None, status=401, message=message)
    response = _see_other("/ui")
    console_session.start_session(request, response, session, principal)
    return response


@router.post("/sign-out")
def sign_out(request: Request, session: SessionDep, fields: FormDep) -> Response:
    viewer = current_viewer(request, session)
    if viewer is not None and not csrf_ok(request, viewer, fields):
        return error_page(viewer, 403, "sign-out refused: missing or wrong CSRF token")
    response = _see_other(SIGN_IN)
    console_session.end_session(request, response, session)
    return response


@router.get("")
def overview(viewer: ViewerDep, session: SessionDep) -> Response:
    now = _now()
    summary = console.overview(session, submitter=viewer.submitter, now=now)
    return render("overview.html", viewer, overview=summary, now=now)


@router.get("/workers")
def workers_page(viewer: ViewerDep, session: SessionDep) -> Response:
    return render("workers.html", viewer, workers=console.worker_rows(session), now=_now())


@router.get("/workers/{name}")
def worker_page(name: NamePath, viewer: ViewerDep, session: SessionDep) -> Response:
    detail = console.worker_detail(
        session, worker_by_name(session, name), submitter=viewer.submitter
    )
    return render("worker.html", viewer, detail=detail, now=_now())


def _refusal(request: Request, viewer: Viewer, fields: dict[str, str]) -> Response | None:
    """The refusal of a state-changing form, or None when it may go ahead: the session's
    CSRF token, this origin, and the admin role."""
    if not csrf_ok(request, viewer, fields):
        return error_page(viewer, 403, "refused: missing or wrong CSRF token or origin")
    if not viewer.is_admin:
        return error_page(viewer, 403, "this action needs the admin token")
    return None


def _set_state(
    name: str,
    state: WorkerState,
    request: Request,
    viewer: Viewer,
    session: SessionDep,
    fields: dict[str, str],
) -> Response:
    refusal = _refusal(request, viewer, fields)
    if refusal is not None:
        return refusal
    reason = fields.get("reason", "").strip() or None
    if reason is not None and len(reason) > MAX_REASON_LENGTH:
        return error_page(viewer, 422, f"the reason is longer than {MAX_REASON_LENGTH} characters")
    changes = WorkerChanges(state=state, reason=reason)
    worker_lifecycle.update_worker(session, name, changes, by=viewer.principal.subject)
    return _see_other(f"/ui/workers/{name}")


@router.post("/workers/{name}/drain")
def drain_worker(
    name: NamePath, request: Request, viewer: ViewerDep, session: SessionDep, fields: FormDep
) -> Response:
    """Admin: the worker finishes what it runs and gets nothing new."""
    return _set_state(name, WorkerState.DRAINING, request, viewer, session, fields)


@router.post("/workers/{name}/resume")
def resume_worker(
    name: NamePath, request: Request, viewer: ViewerDep, session: SessionDep, fields: FormDep
) -> Response:
    """Admin: the worker receives work again."""
    return _set_state(name, WorkerState.ACTIVE, request, viewer, session, fields)


@router.get("/queue")
def queue_page(viewer: ViewerDep, session: SessionDep) -> Response:
    lines = console.queue_by_category(session, submitter=viewer.submitter)
    ordering = ordering_policy.active()
    # Usage against share under fair share (docs/ordering.md); every submitter's, so an
    # administrator's view only.
    shares = groups = None
    if ordering.fair_share and viewer.is_admin:
        halflife = ordering.halflife_seconds
        # In the pull's order: by group first under group-share.
        shares = fair_shares.standings(session, halflife, by_group=ordering.group_share)
        every_group = fair_shares.group_standings(session, halflife)
        # The groups' table only where there are groups: without any, each submitter is
        # a group of its own and the table would repeat the submitters'.
        groups = every_group if any(g.group is not None for g in every_group) else None
    return render(
        "queue.html",
        viewer,
        lines=lines,
        now=_now(),
        shares=shares,
        groups=groups,
        group_share=ordering.group_share,
    )


@router.get("/jobs")
def jobs_page(viewer: ViewerDep, session: SessionDep, state: JobState | None = None) -> Response:
    jobs = console.recent_jobs(session, submitter=viewer.submitter, state=state)
    return render("jobs.html", viewer, jobs=jobs, state=state, states=list(JobState), now=_now())


@router.get("/jobs/{job_id}")
def job_detail(
    job_id: IdPath, request: Request, viewer: ViewerDep, session: SessionDep
) -> Response:
    job = console.visible_job(session, job_id, submitter=viewer.submitter)
    if job is None:
        return error_page(viewer, 404, f"no job {job_id} that you may see")
    policy = request.app.state.settings.allocation_policy
    page = job_page(session, job.job, job.worker, policy)
    return render("job.html", viewer, page=page, now=_now())


@router.post("/jobs/{job_id}/cancel")
def cancel_job(
    job_id: IdPath, request: Request, viewer: ViewerDep, session: SessionDep, fields: FormDep
) -> Response:
    """Admin: cancel a waiting or running job (what it holds is freed)."""
    refusal = _refusal(request, viewer, fields)
    if refusal is not None:
        return refusal
    submission.cancel_job(session, job_id)
    return _see_other(f"/ui/jobs/{job_id}")


@router.get("/categories/{category_id}")
def category_detail(category_id: IdPath, viewer: ViewerDep, session: SessionDep) -> Response:
    page = console.category_page(session, category_id, submitter=viewer.submitter)
    if page is None:
        return error_page(viewer, 404, f"no category {category_id} that you may see")
    return render("category.html", viewer, page=page)


@router.get("/fit")
def fit_page(viewer: ViewerDep, session: SessionDep) -> Response:
    matrix = console.fit_matrix(session, submitter=viewer.submitter)
    return render("fit.html", viewer, matrix=matrix)


@router.get("/demand")
def demand_view(
    request: Request,
    viewer: ViewerDep,
    session: SessionDep,
    paging: Paging50Dep,
    templates: str | None = None,
) -> Response:
    """Admin: GET /v1/demand as a page, with the same ``templates``, ``limit`` and
    ``offset``; without ``templates`` it simulates every registered template, with an
    empty one none."""
    if not viewer.is_admin:
        return error_page(viewer, 403, "the demand needs the admin token")
    try:
        page = demand_page(session, request, templates, limit=paging.limit, offset=paging.offset)
    except InvalidFieldError as bad:
        return error_page(viewer, 422, str(bad))
    return render("demand.html", viewer, page=page)


#: What the what-if page's form holds at first: a change set to edit.
WHATIF_EXAMPLE = """\
# A change set in YAML (or JSON): every key may be left out.
add_workers:
  - name: new-box
    resources: "language: ?java, ?python; java: ?11, ?12"
    slots: 2
drain_workers: []
remove_workers: []
add_jobs:
  - resources: "language: java; java: 12"
"""


@router.get("/whatif")
def whatif_page(viewer: ViewerDep) -> Response:
    """Admin: a form to paste a change set, and what it would change."""
    if not viewer.is_admin:
        return error_page(viewer, 403, "the what-if needs the admin token")
    return render(
        "whatif.html",
        viewer,
        changes=WHATIF_EXAMPLE,
        answer=None,
        problems=[],
        requests={},
        provisional=frozenset(),
    )


@router.post("/whatif")
def whatif_run(
    request: Request, viewer: ViewerDep, session: SessionDep, fields: FormDep
) -> Response:
    """Admin: the what-if of the pasted change set (POST /v1/whatif's service): nothing
    is stored; an invalid change set is shown again with what is wrong in it."""
    refusal = _refusal(request, viewer, fields)
    if refusal is not None:
        return refusal
    text = fields.get("changes", "")
    outcome = whatif_form.run(
        session, text, request.app.state.settings, by=viewer.principal.subject
    )
    return render(
        "whatif.html",
        viewer,
        status=200 if outcome.answer is not None else 422,
        changes=text,
        answer=outcome.answer,
        problems=outcome.problems,
        requests=outcome.requests,
        provisional=outcome.provisional,
    )
