"""Grid Engine scenarios (model ``sge62u5-reference-v1``, the format below) run through
the engine, one fresh database each.

A case is loaded the way an admin would set the cluster up: the attribute table
(``complex_mod`` merged into built-in rows, ``complex_add`` new rows) through the attribute
service, hosts as workers, queue instances in list order (queue sort is ``seq_no``, then
list order, unless the case gives ``scheduler``), values per level through the values
service, current bookings as usage.
The jobs are submitted in order and one scheduling run dispatches them, each seeing the
bookings of the ones before. The outcome has the shape of ``expected``:

* ``submit`` (``accepted``/``rejected``, ``reject_reason``), ``state`` ``failed`` for a job
  accepted but failed at once as no worker can ever run it (it still gets ``global`` and
  ``queues``: the run evaluates it with the others, as Grid Engine would);
* ``global``: ``ok``, ``slots_limit`` (null = unlimited), ``code`` on failure;
* ``queues{qi}``: ``fits``; on failure ``level``, ``code``, ``message``; on success
  ``queue_slots``, ``host_slots``, ``slots_avail``, ``soft_violations``,
  ``soft_violations_naive``, ``master`` (false for an instance that may take slave tasks of
  a parallel job but cannot be its master, a per-job consumable it cannot supply; then
  ``master_refusal`` gives that refusal's ``level``, ``code`` and ``message``);
* ``assignment`` (``{qi: slots}`` or null), ``master_queue``, ``soft_violations``,
  ``soft_violations_naive``, ``assignment_naive`` when the naive count would choose
  another queue;
* ``quota_refusal`` when a resource quota stopped the job (``qstat -j``'s words);
  ``quota_usage`` after all jobs when the case has ``quota_sets`` (the sets as
  ``qconf -srqs`` text; ``user`` of a job is its owner): per rule and usage key, what
  running jobs hold of each limited attribute;
* a job's ``hard_queue_list``, ``master_queue_list`` and ``soft_queue_list`` (qsub's
  ``-q``, ``-masterq`` and ``-soft -q``; a list of wc_queue items or their text) give an
  instance no item of ``-q`` names the ``code`` ``not_in_queue_list``, and one no item of
  ``-masterq`` names ``"master": false`` with ``master_refusal`` code
  ``not_in_master_queue_list``; soft ``-q`` items add to ``soft_violations``;
* a queue instance's ``load_thresholds`` (queue_conf(5), text as ``qconf -sq`` shows it)
  and ``seq_no``: the first instance of a cluster queue that gives one sets the cluster
  queue's value; an instance that gives a different value has a per-host value
  (``seq_no 0,[h2=1]``), one that gives none takes the cluster queue's. An instance in
  alarm has the ``code`` ``overloaded``;
* a queue instance's ``state``: ``"disabled"`` (``qmod -d``), ``"suspended"``
  (``qmod -s``) or a list of both: the scheduler drops it before any job, with the
  ``code`` ``disabled`` or ``suspended`` (``suspended`` first, then ``overloaded``, then
  ``disabled``, as Grid Engine 6.2u5 drops them);
* the case's top-level ``scheduler``: ``{"queue_sort_method": "load"|"seqno",
  "load_formula": "np_load_avg"}`` (sched_conf(5); left out: ``load`` and
  ``np_load_avg``, Grid Engine's defaults). With ``load`` queue instances sort by their
  host's load formula value, then seq_no; with ``seqno`` by seq_no, then the value; then
  list order. Without the key they sort by seq_no, then list order, and read no load;
* ``cluster.host_groups`` (``{"@linux": ["h1", "@sub"]}``, hostgroup(5), ``qconf
  -Ahgrp``: members are hosts and other groups, a cycle is an error) are named in queue
  lists (``all.q@@linux``, ``*@@lin*``) and in the ``hosts`` filter of quota rules
  (``hosts {@linux}``, ``hosts !@linux``); ``cluster.access_lists`` (``{"staff":
  ["alice"]}``, access_list(5), ``qconf -au``) in their ``users`` filter (``users
  @staff``, ``users {@staff}``: one usage entry per member); ``cluster.projects``
  (``["p1"]``, project(5), ``qconf -Aprj``) are the projects a job may name with its
  ``"project"`` (``qsub -P``; an unknown one is rejected, ``job rejected: the requested
  project "p9" does not exist``) and quota rules filter with ``projects``;
* a job's ``"verify": "e"`` is ``qsub -w e``: a job that could run nowhere in the empty
  cluster is rejected (``reject_reason`` ``error: no suitable queues``); with or without
  it a queue list item that names no queue instance is rejected (``Job was rejected
  because job requests unknown queue "x"``);
* ``remaining`` after all jobs: capacity minus booking of every consumable that has a
  capacity, ``{"global": {...}, "hosts": {h: {...}}, "queues": {qi: {...}}}`` (``slots``
  included); EXCL attributes show ``{"exclusive": n, "nonexclusive": n}``.

A case whose cluster cannot be set up (a quota set, host group or attribute the engine
refuses) gets the outcome ``{"error": message}`` and does not match; the other cases of
the file still run. A case matches when every key of its ``expected`` equals the
outcome, compared as app/matching/scenarios/compare.py says (``message`` keys are
informative and not compared); app/matching/scenarios/run.py reads the files and runs the cases. The
engine's SQL filter is checked against the evaluator on the way: a queue instance of a
worker the misfit cache ruled out must not fit (``sql_disagrees`` lists any that do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.models import ConsumableUsage, Job, JobState, Queue, QueueInstance, Worker
from app.matching.errors import MatchingError
from app.matching.gridengine import table as gridengine_table
from app.matching.gridengine.admin import change_attribute, set_values
from app.matching.gridengine.decide import Decision
from app.matching.gridengine.groups import (
    create_access_list,
    create_host_group,
    create_project,
    replace_host_group,
)
from app.matching.gridengine.parallel import upsert_pe
from app.matching.gridengine.queue_conf import (
    UNSET,
    InstanceChanges,
    change_instance,
    set_load_thresholds,
)
from app.matching.gridengine.queue_sort import set_scheduler_config
from app.matching.gridengine.quota_sets import create_quota_set, list_quota_sets, usage_lines
from app.matching.gridengine.run import schedule
from app.matching.gridengine.values import Target
from app.matching.requests import JobSpec
from app.matching.scenarios.cases import ScenarioError
from app.matching.submission import submit_job
from app.matching.workers import WorkerSpec, upsert_worker
from app.notations.errors import NotationError
from app.notations.gridengine.definitions import Relop
from app.notations.gridengine.load_formula import DEFAULT_LOAD_FORMULA
from app.wire.queues import QueueSpec

MODEL = "sge62u5-reference-v1"


def check_case(case: Mapping[str, Any]) -> None:
    """What the format requires of a case; ScenarioError otherwise."""
    if "cluster" not in case:
        raise ScenarioError(f"case {case['id']}: a case needs 'cluster'")
    if "job" not in case and "jobs" not in case:
        raise ScenarioError(f"case {case['id']}: a case needs 'job' or 'jobs'")
    model = case.get("model", MODEL)
    if model != MODEL:
        raise ScenarioError(f"case {case['id']}: model {model!r} is not {MODEL!r}")


def _request_text(pairs: Sequence[Sequence[str | None]]) -> str:
    return ",".join(f"{name}" if value is None else f"{name}={value}" for name, value in pairs)


def _queue_list_text(items: str | Sequence[str]) -> str:
    """A ``*_queue_list`` field: the list's text, or its items to join with commas."""
    return items if isinstance(items, str) else ",".join(items)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _setup_table(session: Session, case: Mapping[str, Any]) -> None:
    for row in case.get("complex_mod", []):
        current = gridengine_table.get_attribute(session, row["name"])
        merged = {
            "name": current.name,
            "shortcut": current.shortcut,
            "type": current.type,
            "relop": current.relop,
            "requestable": current.requestable,
            "consumable": current.consumable,
            "default": current.default,
            "urgency": current.urgency,
            **row,
        }
        change_attribute(session, current.name, gridengine_table.definition_from_body(merged))
    for row in case.get("complex_add", []):
        gridengine_table.create_attribute(session, gridengine_table.definition_from_body(row))


def _setup_cluster(session: Session, cluster: Mapping[str, Any]) -> dict[str, int]:
    """Workers and queue instances in list order; returns queue instance name -> id."""
    queues = cluster.get("queues", [])
    hosts = [h["name"] for h in cluster.get("hosts", [])]
    for queue in queues:
        if queue["host"] not in hosts:
            hosts.append(queue["host"])
    # A cluster queue's seq_no and load_thresholds are those of its first instance that
    # gives them; an instance that gives another value has a per-host value (queue_conf(5)
    # ``seq_no 0,[h2=1]``), one that gives none takes the cluster queue's.
    seq: dict[str, int] = {}
    thresholds: dict[str, str] = {}
    for queue in queues:
        cq = queue["name"].partition("@")[0]
        seq.setdefault(cq, int(queue.get("seq_no", 0)))
        if "load_thresholds" in queue:
            thresholds.setdefault(cq, queue["load_thresholds"])
    for cq, seq_no in seq.items():
        session.add(Queue(name=cq, seq_no=seq_no))
    session.flush()
    for cq, text in thresholds.items():
        set_load_thresholds(session, cq, text)
    specs: dict[str, list[QueueSpec]] = {host: [] for host in hosts}
    # One upsert per queue instance, so that instance ids follow the list order (the
    # queue sort's tie-break).
    for queue in queues:
        cq = queue["name"].partition("@")[0]
        specs[queue["host"]].append(QueueSpec(cq, int(queue["slots"])))
        upsert_worker(session, WorkerSpec(name=queue["host"], queues=tuple(specs[queue["host"]])))
    for host in hosts:
        if not specs[host]:
            # A host without queue instances (no category exists yet, so no misfit rows).
            session.add(Worker(name=host, generation=1))
    session.flush()
    names = {
        f"{cq}@{host}": qi_id
        for qi_id, cq, host in session.execute(
            select(QueueInstance.id, Queue.name, Worker.name)
            .join(Queue, Queue.id == QueueInstance.queue_id)
            .join(Worker, Worker.id == QueueInstance.worker_id)
        )
    }
    worker_ids = dict(session.execute(select(Worker.name, Worker.id)).all())
    for queue in queues:
        cq, host = queue["name"].partition("@")[0], queue["host"]
        own_seq = int(queue["seq_no"]) if "seq_no" in queue else None
        own_thresholds = queue.get("load_thresholds")
        change_instance(
            session,
            cq,
            host,
            InstanceChanges(
                disabled="disabled" in _states(queue),
                suspended="suspended" in _states(queue),
                seq_no=own_seq if own_seq is not None and own_seq != seq[cq] else UNSET,
                load_thresholds=(
                    own_thresholds
                    if own_thresholds is not None and own_thresholds != thresholds.get(cq)
                    else UNSET
                ),
            ),
        )
    targets: list[tuple[Target, Mapping[str, Any]]] = []
    if "global" in cluster:
        targets.append((Target("global"), cluster["global"]))
    for host in cluster.get("hosts", []):
        targets.append((Target("host", worker_ids[host["name"]]), host))
    for queue in queues:
        qi = Target("queue_instance", worker_ids[queue["host"]], names[queue["name"]])
        targets.append((qi, {"complex_values": queue.get("complex_values", {}), **queue}))
    for target, spec in targets:
        for field in ("complex_values", "load_values", "attributes"):
            values = {k: str(v) for k, v in (spec.get(field) or {}).items()}
            if values:
                set_values(session, target, field, values)
        _set_used(session, target, spec.get("used") or {}, spec.get("used_nonexclusive") or {})
    return names


def _states(queue: Mapping[str, Any]) -> tuple[str, ...]:
    """A queue instance's ``state``: ``disabled``, ``suspended`` or a list of both."""
    given = queue.get("state")
    if given is None:
        return ()
    states = (given,) if isinstance(given, str) else tuple(given)
    unknown = [state for state in states if state not in ("disabled", "suspended")]
    if unknown:
        raise ScenarioError(
            f"queue instance {queue['name']}: state {unknown[0]!r} is not 'disabled' or 'suspended'"
        )
    return states


def _setup_scheduler(session: Session, case: Mapping[str, Any]) -> None:
    """The case's ``scheduler`` configuration (sched_conf(5)), if it gives one."""
    given = case.get("scheduler")
    if given is None:
        return
    set_scheduler_config(
        session,
        str(given.get("queue_sort_method", "load")),
        str(given.get("load_formula", DEFAULT_LOAD_FORMULA)),
        gridengine_table.load_table(session),
    )


def _set_used(
    session: Session, target: Target, used: Mapping[str, float], nonexclusive: Mapping[str, float]
) -> None:
    ids = gridengine_table.attribute_ids(session)
    table = gridengine_table.load_table(session)
    # An EXCL attribute may come with non-exclusive users only (``used_nonexclusive``
    # without a ``used`` entry): the format asks for both counters, so each key of either
    # map sets both.
    for key in {**used, **nonexclusive}:
        amount = used.get(key, 0.0)
        name = table[key].name
        if name == "slots" and target.level == "queue_instance":
            session.execute(
                update(QueueInstance)
                .where(QueueInstance.id == target.queue_instance_id)
                .values(used_slots=int(amount))
            )
            continue
        session.execute(
            update(ConsumableUsage)
            .where(
                ConsumableUsage.attribute_id == ids[name],
                *target.rows_of(ConsumableUsage),
            )
            .values(used=float(amount), used_nonexclusive=float(nonexclusive.get(key, 0.0)))
        )
    session.flush()


def _jobs(case: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(case["jobs"]) if "jobs" in case else [case["job"]]


def _submit(
    session: Session, spec: Mapping[str, Any], index: int
) -> tuple[int | None, dict[str, Any]]:
    pe = spec.get("pe")
    pe_name = None
    pe_slots = None
    if pe is not None:
        pe_name = str(pe.get("name", f"pe{index}"))
        upsert_pe(session, pe_name, str(pe.get("allocation_rule", "$fill_up")), 9_999_999)
        pe_slots = str(spec.get("slots", pe.get("slots", 1)))
    job_spec = JobSpec(
        hard=_request_text(spec.get("hard", [])),
        soft=_request_text(spec.get("soft", [])),
        pe=pe_name,
        pe_slots=pe_slots,
        queue_list=_queue_list_text(spec.get("hard_queue_list", [])),
        master_queue_list=_queue_list_text(spec.get("master_queue_list", [])),
        soft_queue_list=_queue_list_text(spec.get("soft_queue_list", [])),
        project=spec.get("project"),
        verify=str(spec.get("verify", "n")),
    )
    savepoint = session.begin_nested()
    try:
        job = submit_job(session, job_spec, submitter=str(spec.get("user", "scenario")))
    except MatchingError as error:
        savepoint.rollback()
        reason = getattr(error, "message", str(error))
        return None, {"submit": "rejected", "reject_reason": reason}
    savepoint.commit()
    return job.id, {"submit": "accepted"}


def _refused_at_submission(
    session: Session, submitted: Sequence[tuple[int | None, Mapping[str, Any]]]
) -> set[int]:
    """The accepted jobs that failed at once ("No suitable worker found"), put back to
    waiting for the run. Grid Engine has no such refusal: its run evaluates the job with
    the others, and the format asks for every job's ``global`` and ``queues`` outcome (a
    FORCED attribute it does not request, a host that lacks what it asks for), each seeing
    the bookings of the jobs before it. The run cannot place such a job (no instance fits
    it; if one did, the case reports a disagreement), and it is failed again afterwards."""
    accepted = [job_id for job_id, _outcome in submitted if job_id is not None]
    refused = set(
        session.scalars(select(Job.id).where(Job.id.in_(accepted), Job.state == JobState.FAILED))
    )
    if refused:
        session.execute(update(Job).where(Job.id.in_(refused)).values(state=JobState.WAITING))
        session.expire_all()
    return refused


def _fail_again(session: Session, refused: set[int]) -> None:
    if refused:
        session.execute(update(Job).where(Job.id.in_(refused)).values(state=JobState.FAILED))
        session.expire_all()


def _queue_outcome(decision: Decision, names: Mapping[int, str]) -> dict[str, Any]:
    queues: dict[str, Any] = {}
    for slot, fit in decision.fits:
        if fit.fits:
            queues[names[slot.id]] = {
                "fits": True,
                "queue_slots": fit.queue_slots,
                "host_slots": fit.host_slots,
                "slots_avail": fit.slots_avail,
                "soft_violations": fit.soft_violations,
                "soft_violations_naive": fit.soft_violations_naive,
                "master": slot.id not in decision.not_master,
            }
            refusal = decision.not_master.get(slot.id)
            if refusal is not None:
                assert refusal.level is not None and refusal.code is not None
                queues[names[slot.id]]["master_refusal"] = {
                    "level": refusal.level.value,
                    "code": refusal.code.value,
                    "message": refusal.message,
                }
        else:
            assert fit.level is not None and fit.code is not None
            queues[names[slot.id]] = {
                "fits": False,
                "level": fit.level.value,
                "code": fit.code.value,
                "message": fit.message,
            }
    return queues


def _global_outcome(decision: Decision) -> dict[str, Any]:
    for _slot, fit in decision.fits:
        if not fit.fits and fit.level is not None and fit.level.value == "global":
            assert fit.code is not None
            return {"ok": False, "code": fit.code.value}
    limit = next((fit.global_slots for _slot, fit in decision.fits if fit.fits), None)
    return {"ok": True, "slots_limit": limit}


def _assignment_outcome(decision: Decision, names: Mapping[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "assignment": None,
        "master_queue": None,
        "soft_violations": None,
        "soft_violations_naive": None,
    }
    if decision.assignment is None or decision.master is None:
        return out
    fits = {slot.id: fit for slot, fit in decision.fits}
    out["assignment"] = {names[q]: n for q, n in decision.assignment.items()}
    out["master_queue"] = names[decision.master]
    out["soft_violations"] = sum(
        fits[q].soft_violations * n for q, n in decision.assignment.items()
    )
    out["soft_violations_naive"] = sum(
        fits[q].soft_violations_naive * n for q, n in decision.assignment.items()
    )
    if len(decision.assignment) == 1:
        fitting = [(slot, fit) for slot, fit in decision.fits if fit.fits]
        naive = min(fitting, key=lambda item: item[1].soft_violations_naive)[0]
        if naive.id != decision.master:
            out["assignment_naive"] = {names[naive.id]: 1}
    return out


def _remaining(session: Session, names: Mapping[int, str]) -> dict[str, Any]:
    table = gridengine_table.load_table(session)
    by_id = {v: k for k, v in gridengine_table.attribute_ids(session).items()}
    hosts = dict(session.execute(select(Worker.id, Worker.name)).all())
    out: dict[str, Any] = {"global": {}, "hosts": {}, "queues": {}}
    for qi_id, slots, used in session.execute(
        select(QueueInstance.id, QueueInstance.slots, QueueInstance.used_slots)
    ):
        out["queues"].setdefault(names[qi_id], {})["slots"] = slots - used
    for usage in session.scalars(select(ConsumableUsage).order_by(ConsumableUsage.id)):
        name = by_id[usage.attribute_id]
        if table[name].relop is Relop.EXCL:
            value: Any = {
                "exclusive": _number(usage.used),
                "nonexclusive": _number(usage.used_nonexclusive),
            }
        else:
            value = _number(usage.capacity - usage.used)
        if usage.level == "global":
            out["global"][name] = value
        elif usage.level == "host":
            assert usage.worker_id is not None
            out["hosts"].setdefault(hosts[usage.worker_id], {})[name] = value
        else:
            assert usage.queue_instance_id is not None
            out["queues"].setdefault(names[usage.queue_instance_id], {})[name] = value
    return out


def _quota_usage(session: Session) -> dict[str, dict[str, Any]]:
    """After all jobs: per rule (``set/rule``) and usage key, ``attribute: used``."""
    out: dict[str, dict[str, Any]] = {}
    for row in list_quota_sets(session, limit=10_000, offset=0):
        for line in usage_lines(session, row):
            out.setdefault(line.rule, {}).setdefault(line.key, {})[line.attribute] = _number(
                line.used
            )
    return out


def _setup_groups(session: Session, cluster: Mapping[str, Any]) -> None:
    """Host groups (each made empty first, then given its members, so that sub-groups
    may come in any order and a cycle is refused in Grid Engine's words), access lists and
    projects."""
    host_groups = cluster.get("host_groups") or {}
    for name in host_groups:
        create_host_group(session, name, [])
    for name, members in host_groups.items():
        replace_host_group(session, name, list(members))
    for name, users in (cluster.get("access_lists") or {}).items():
        create_access_list(session, name, list(users))
    for name in cluster.get("projects") or []:
        create_project(session, name)


def _setup(session: Session, case: Mapping[str, Any]) -> dict[str, int]:
    """The case's cluster; queue instance name -> id."""
    _setup_table(session, case)
    names_by_queue = _setup_cluster(session, case["cluster"])
    _setup_groups(session, case["cluster"])
    _setup_scheduler(session, case)
    for index, text in enumerate(case.get("quota_sets", [])):
        try:
            create_quota_set(session, text)
        except MatchingError as error:
            message = getattr(error, "message", str(error))
            raise _SetupError(f"quota_sets[{index}]: {message}") from None
    return names_by_queue


class _SetupError(Exception):
    """A case's cluster could not be set up: the message names what the engine refused."""


def run_case(database: Database, case: Mapping[str, Any]) -> dict[str, Any]:
    """The outcome of one case, in the shape of its ``expected``; ``{"error": ...}`` when
    its cluster cannot be set up."""
    with database.transaction() as session:
        try:
            names_by_queue = _setup(session, case)
        except _SetupError as error:
            session.rollback()
            return {"error": str(error)}
        except (MatchingError, NotationError) as error:
            session.rollback()
            return {"error": f"cluster: {getattr(error, 'message', str(error))}"}
        names = {qi_id: name for name, qi_id in names_by_queue.items()}
        submitted: list[tuple[int | None, dict[str, Any]]] = [
            _submit(session, spec, index) for index, spec in enumerate(_jobs(case))
        ]
        refused = _refused_at_submission(session, submitted)
        report = schedule(session, trace=True)
        _fail_again(session, refused)
        decisions = {job_id: decision for job_id, decision, _booked in report.decisions}
        outcomes = []
        disagreements: list[str] = []
        qi_worker = dict(session.execute(select(QueueInstance.id, QueueInstance.worker_id)).all())
        for job_id, outcome in submitted:
            if job_id is None:
                outcomes.append(outcome)
                continue
            job = session.get(Job, job_id)
            assert job is not None
            decision = decisions.get(job_id)
            if job_id in refused:
                outcome["state"] = "failed"
            if decision is None:
                # Not considered: its category was rejected earlier in the run.
                outcome.update({"assignment": None, "master_queue": None})
                outcomes.append(outcome)
                continue
            if job_id in refused and decision.assignment is not None:
                # The run placed a job the submission check called unplaceable.
                disagreements.extend(names[q] for q in decision.assignment)
            excluded = report.sql_excluded.get(job_id, set())
            for slot, fit in decision.fits:
                if fit.fits and qi_worker[slot.id] in excluded:
                    disagreements.append(names[slot.id])
            outcome["global"] = _global_outcome(decision)
            outcome["queues"] = _queue_outcome(decision, names)
            outcome.update(_assignment_outcome(decision, names))
            if decision.quota_refusal is not None:
                outcome["quota_refusal"] = decision.quota_refusal
            outcomes.append(outcome)
        result: dict[str, Any] = {}
        if "jobs" in case:
            result["jobs"] = outcomes
        else:
            result.update(outcomes[0])
        result["remaining"] = _remaining(session, names)
        if case.get("quota_sets"):
            result["quota_usage"] = _quota_usage(session)
        if disagreements:
            result["sql_disagrees"] = sorted(set(disagreements))
        session.rollback()
    return result


__all__ = ["MODEL", "check_case", "run_case"]
