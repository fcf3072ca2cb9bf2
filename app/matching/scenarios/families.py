"""Momotor, Flux and debusine cases: one runner, a table of what each family may use.

The three families share one pipeline (submission with its "No suitable worker found",
the misfit cache, ranked candidates, the explanation, a worker's pull, a multi-node
allocation), so one runner serves them; what tells them apart is which notation fields
their workers and jobs carry, which the table below holds, so that a case filed under a
family tests that family's rules and not another's.

A case, one JSON object per line (docs/cli.md, "Scenario files"):

* ``family``: ``momotor``, ``flux`` or ``debusine``; ``id``, ``title``, ``source`` (where
  the expected answer comes from);
* ``cluster``: ``workers``, each a ``POST /v1/workers`` body (debusine workers may add
  ``static_metadata``, set as ``PUT /v1/workers/{name}/metadata`` sets it, and
  ``dynamic_metadata``, reported as ``POST /v1/workers/{name}/metadata`` reports it);
  ``tasks``, each a ``POST /v1/tasks`` body (debusine);
* ``jobs``: ``POST /v1/jobs`` bodies, submitted in order, each with an optional ``label``
  (``j1``, ``j2``, ... by position);
* ``allocate``: labels of jobs to allocate in turn (``POST /v1/jobs/{id}/allocate``);
  ``pulls``: worker names that pull in turn (``POST /v1/workers/{name}/pull``);
  ``policy``: the allocation policy, ``first`` (the default) or ``pack``;
* ``ordering``: the ordering policy (``JOBMATCH_ORDERING``'s words, docs/ordering.md),
  today's by default; a job may name its ``submitter`` (``scenario`` otherwise), and
  ``usage`` (slot-seconds per submitter, booked after the submissions), ``weights`` and
  ``groups`` (per submitter: its group, null for none) and ``group_weights`` (per group)
  set where fair share stands before anything is read (app/matching/scenarios/standings.py).

The outcome: ``jobs`` by label, each with ``submit`` (``accepted``/``rejected``),
``refused`` (the 422's detail, or the failure reason of a job no worker could ever run),
``candidates`` (names, best first), ``strengths`` (Momotor's names: STRONGEST, STRONG,
NEUTRAL, WEAK, WEAKEST) and ``reasons`` (per worker, the explanation's first reason or
null), all read after every submission and before any allocation or pull; then ``state``
and ``worker`` at the end. ``allocate`` lists each allocation's leader worker or its
refusal, ``pull_order`` what each pull got (``{"worker", "job"}``, ``job`` null for
nothing), and ``allocations`` the R (``GET /v1/jobs/{id}/allocation``) of each job holding
vertices at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import Job, JobState, Worker
from app.matching import candidates, readiness, submission, worker_lifecycle
from app.matching.allocation import allocate
from app.matching.allocation import r as r_description
from app.matching.allocation.allocator import Policy
from app.matching.debusine import metadata as debusine_metadata
from app.matching.debusine.registry import upsert_task
from app.matching.dispatch import pull as dispatch
from app.matching.errors import MatchingError
from app.matching.ordering import policy as ordering_policy
from app.matching.scenarios.bodies import job_spec, task_spec, worker_spec
from app.matching.scenarios.cases import ScenarioError
from app.matching.scenarios.standings import check_standings, ordering_of, stand
from app.notations.errors import NotationError

#: Who the runner acts as (the admin of ``POST /v1/workers``, the submitter of jobs).
ACTOR = "scenario"


@dataclass(frozen=True)
class Family:
    name: str
    #: Notation fields of ``POST /v1/workers`` and ``POST /v1/jobs`` bodies the family's
    #: cases may use, beside the fields every family shares.
    worker_fields: frozenset[str]
    job_fields: frozenset[str]
    #: Fields a worker of the case may carry beside its body.
    worker_extras: frozenset[str] = frozenset()
    takes_tasks: bool = False


SHARED_WORKER_FIELDS = frozenset({"name", "slots", "state", "queues"})
SHARED_JOB_FIELDS = frozenset({"priority", "slots", "command", "timeout", "label", "submitter"})
#: What a job body of a case holds beside the API's fields.
CASE_JOB_FIELDS = ("label", "submitter")

FAMILIES = {
    "momotor": Family("momotor", frozenset({"resources"}), frozenset({"resources"})),
    "flux": Family(
        "flux",
        frozenset({"rank", "properties", "inventory"}),
        frozenset({"constraint", "requires", "shape", "jobspec"}),
    ),
    "debusine": Family(
        "debusine",
        frozenset(),
        frozenset({"task"}),
        worker_extras=frozenset({"static_metadata", "dynamic_metadata"}),
        takes_tasks=True,
    ),
}


def check_case(case: Mapping[str, Any]) -> Family:
    """The case's family, once its fields are the family's; ScenarioError otherwise."""
    name = case.get("family")
    family = FAMILIES.get(str(name))
    if family is None:
        raise ScenarioError(
            f"case {case['id']}: family {name!r} is none of gridengine, {', '.join(FAMILIES)}"
        )
    cluster = case.get("cluster")
    if not isinstance(cluster, dict) or not isinstance(cluster.get("workers"), list):
        raise ScenarioError(f"case {case['id']}: a case needs 'cluster' with 'workers'")
    if not isinstance(case.get("jobs"), list):
        raise ScenarioError(f"case {case['id']}: a case needs 'jobs' (a list)")
    if cluster.get("tasks") and not family.takes_tasks:
        raise ScenarioError(f"case {case['id']}: {family.name} cases register no tasks")
    for steps in ("allocate", "pulls"):
        names = case.get(steps, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ScenarioError(f"case {case['id']}: '{steps}' is a list of names")
    if case.get("policy", "first") not in ("first", "pack"):
        raise ScenarioError(f"case {case['id']}: policy {case['policy']!r} is not first or pack")
    check_standings(case)
    allowed_worker = SHARED_WORKER_FIELDS | family.worker_fields | family.worker_extras
    for body in cluster["workers"]:
        _check(case, f"worker {body.get('name')}", body, allowed_worker, family)
    for body in case["jobs"]:
        _check(case, "job", body, SHARED_JOB_FIELDS | family.job_fields, family)
    return family


def _check(
    case: Mapping[str, Any], what: str, body: Any, allowed: frozenset[str], family: Family
) -> None:
    if not isinstance(body, dict):
        raise ScenarioError(f"case {case['id']}: a {what.split()[0]} is a JSON object")
    other = sorted(set(body) - allowed)
    if other:
        raise ScenarioError(
            f"case {case['id']}: {what}: {', '.join(other)} not among the fields of "
            f"{family.name} cases"
        )


def _labels(case: Mapping[str, Any]) -> list[str]:
    labels = [str(body.get("label", f"j{n}")) for n, body in enumerate(case["jobs"], start=1)]
    if len(set(labels)) != len(labels):
        raise ScenarioError(f"case {case['id']}: job labels repeat")
    return labels


def _setup(session: Session, case: Mapping[str, Any]) -> None:
    cluster = case["cluster"]
    try:
        for body in cluster.get("tasks", []):
            upsert_task(session, task_spec(body))
        for entry in cluster["workers"]:
            body = {k: v for k, v in entry.items() if not k.endswith("_metadata")}
            # As POST /v1/workers without ?replace: a name listed twice is refused.
            worker_lifecycle.register_worker(session, worker_spec(body), by="admin", replace=False)
            if "static_metadata" in entry:
                debusine_metadata.set_static_metadata(
                    session, body["name"], entry["static_metadata"]
                )
            if "dynamic_metadata" in entry:
                debusine_metadata.report_dynamic_metadata(
                    session, body["name"], entry["dynamic_metadata"]
                )
    except (MatchingError, NotationError) as error:
        raise ScenarioError(f"case {case['id']}: the cluster was refused: {error}") from None


def _submit(session: Session, body: Mapping[str, Any]) -> tuple[Job | None, dict[str, Any]]:
    spec = job_spec({k: v for k, v in body.items() if k not in CASE_JOB_FIELDS})
    savepoint = session.begin_nested()
    try:
        job = submission.submit_job(session, spec, submitter=str(body.get("submitter", ACTOR)))
    except (MatchingError, NotationError) as error:
        savepoint.rollback()
        return None, {"submit": "rejected", "refused": str(error)}
    savepoint.commit()
    outcome: dict[str, Any] = {"submit": "accepted"}
    if job.failure_reason is not None:
        outcome["refused"] = job.failure_reason
    return job, outcome


def _ranking(session: Session, job: Job, policy: Policy) -> dict[str, Any]:
    """Candidates, strengths and each worker's first reason, as the API shows them."""
    ranked = candidates.job_candidates(session, job) if job.state is JobState.WAITING else []
    verdicts, _summary = readiness.explain_workers(session, job, None, policy, [])
    return {
        "candidates": [c.worker for c in ranked],
        "strengths": {c.worker: c.strength_name for c in ranked},
        # A worker that could run it after the jobs that go first (outranked) can run it.
        "reasons": {
            v.worker: None if v.answer == readiness.OUTRANKED else v.reason for v in verdicts
        },
    }


def _allocate(
    session: Session, jobs: Mapping[str, Job | None], label: str, policy: Policy
) -> dict[str, Any]:
    job = jobs.get(label)
    if job is None:
        return {"job": label, "refused": f"no accepted job labelled {label!r}"}
    savepoint = session.begin_nested()
    try:
        started = allocate.schedule_job(session, job.id, policy)
    except MatchingError as error:
        savepoint.rollback()
        return {"job": label, "refused": str(error)}
    savepoint.commit()
    return {"job": label, "worker": _worker_name(session, started)}


def _pull(
    session: Session, labels: Mapping[int, str], worker: str, policy: Policy
) -> dict[str, Any]:
    try:
        job, _puller = dispatch.pull_for(session, worker, policy)
    except MatchingError as error:
        return {"worker": worker, "refused": str(error)}
    return {"worker": worker, "job": None if job is None else labels[job.id]}


def _worker_name(session: Session, job: Job) -> str | None:
    if job.worker_id is None:
        return None
    return session.scalar(select(Worker.name).where(Worker.id == job.worker_id))


def run_case(database: Database, case: Mapping[str, Any]) -> dict[str, Any]:
    """The outcome of one case, in one transaction that is rolled back."""
    check_case(case)
    labels = _labels(case)
    ordering = ordering_of(case)
    before = ordering_policy.active()
    ordering_policy.use(ordering)
    try:
        return _run(database, case, labels, ordering)
    finally:
        ordering_policy.use(before)


def _run(
    database: Database,
    case: Mapping[str, Any],
    labels: list[str],
    ordering: ordering_policy.Ordering,
) -> dict[str, Any]:
    policy = cast(Policy, case.get("policy", "first"))
    with database.transaction() as session:
        _setup(session, case)
        jobs: dict[str, Job | None] = {}
        outcomes: dict[str, dict[str, Any]] = {}
        for label, body in zip(labels, case["jobs"], strict=True):
            jobs[label], outcomes[label] = _submit(session, body)
        stand(session, case, ordering.halflife_seconds)
        for label, job in jobs.items():
            if job is not None:
                outcomes[label].update(_ranking(session, job, policy))
        result: dict[str, Any] = {"jobs": outcomes}
        if "allocate" in case:
            result["allocate"] = [_allocate(session, jobs, lbl, policy) for lbl in case["allocate"]]
        if "pulls" in case:
            by_id = {job.id: label for label, job in jobs.items() if job is not None}
            result["pull_order"] = [_pull(session, by_id, w, policy) for w in case["pulls"]]
        result["allocations"] = {}
        for label, job in jobs.items():
            if job is None:
                continue
            session.refresh(job)
            outcomes[label].update(state=job.state.value, worker=_worker_name(session, job))
            held = r_description.booked_r(session, job.id)
            if held:
                result["allocations"][label] = held
        session.rollback()
    return result
