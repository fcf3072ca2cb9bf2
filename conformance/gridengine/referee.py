"""One case on the real Grid Engine and on jobmatch, compared per job (``submit``,
``assignment``, ``master_queue``), and the recorded vectors.

A case runs on Grid Engine as an admin would set it up: reset, attribute table, exec host
and global complex_values, host groups, access lists, projects, parallel environments,
queues (per-host values as ``[host=value]``), quota sets, queue states, the scheduler
configuration, load values through the load sensor; then its jobs submitted on hold in
order, released together, and the scheduler's decision read back.
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.db.engine import Database
from app.matching.scenarios.cases import ScenarioError
from app.matching.scenarios.run import check_case, run_case
from conformance.gridengine import cluster, translate

#: The keys compared per job.
COMPARED = ("submit", "assignment", "master_queue")


@dataclass
class Verdict:
    """A case's result: ``agree``, ``DIFFER``, ``documented divergence`` (jobmatch gives
    the answer docs/notations/gridengine.md documents), ``not refereeable``, ``case
    error`` or ``failed`` (jobmatch raised)."""

    id: str
    status: str
    detail: str = ""
    gridengine: list[dict[str, Any]] = field(default_factory=list)
    jobmatch: list[dict[str, Any]] = field(default_factory=list)
    scheduler: dict[str, str] = field(default_factory=dict)
    pinned: dict[str, float] = field(default_factory=dict)


def inputs(case: Mapping[str, Any]) -> dict[str, Any]:
    """The case without what a run adds or expects (``expected``, the line number, an
    earlier recording)."""
    drop = {"_line", "expected", "gridengine"}
    return {k: v for k, v in case.items() if k not in drop}


def jobmatch_answer(database: Database, case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """jobmatch's per-job answer on ``database``."""
    outcome = run_case(database, case)
    jobs = outcome["jobs"] if "jobs" in case else [outcome]
    return [{k: job.get(k) for k in COMPARED} for job in jobs]


def compared(answer: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: job.get(k) for k in COMPARED} for job in answer]


def gives_documented_answer(case: Mapping[str, Any], answer: list[dict[str, Any]]) -> bool:
    """Whether the case is a documented divergence and jobmatch gives its documented
    answer (``divergence`` and ``jobmatch_answer``, docs/conformance.md)."""
    documented = case.get("jobmatch_answer")
    return bool(case.get("divergence")) and (
        documented is not None and compared(documented["jobs"]) == answer
    )


def _available_hosts(up: list[str]) -> dict[str, str]:
    """Logical host -> exec host: h1 is this machine, h2, h3, ... the execds in network
    namespaces (install.sh) that report load."""
    own = platform.node()
    out = {}
    if own in up:
        out["h1"] = own
    for name in up:
        if re.fullmatch(r"h[2-9]", name):
            out[name] = name
    return out


def gridengine_answer(
    case: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, float]]:
    """Grid Engine's per-job answer (with pending reasons), the scheduler settings and the
    np_load_avg the referee pinned on hosts to order them (translate.pinned_loads)."""
    present = cluster.exec_hosts()
    hosts = translate.host_map(case, _available_hosts(cluster.up_hosts()))
    pinned = translate.pinned_loads(case)
    problem = translate.tie_problem(case, pinned)
    if problem is not None:
        raise translate.CaseError(problem)
    jobs = translate.qsub_jobs(case, hosts)
    table = translate.complex_table(cluster.stock_complexes(), case)
    pes = translate.pe_names(case)
    cluster.reset(present)
    try:
        if table is not None:
            cluster.set_complexes(table)
        for logical, values in translate.host_values(case, "complex_values").items():
            name = "global" if logical == "global" else hosts[logical]
            cluster.qconf_file("-Me", translate.exec_host_file(name, values))
        c = case["cluster"]
        for group, members in c.get("host_groups", {}).items():
            cluster.qconf_file("-Ahgrp", translate.host_group_file(group, members, hosts))
        for name, members in c.get("access_lists", {}).items():
            cluster.run(["qconf", "-au", ",".join(members), name])
        for project in c.get("projects", []):
            cluster.qconf_file("-Aprj", translate.project_file(project))
        for name, rule in pes.items():
            cluster.qconf_file("-Ap", translate.pe_file(name, rule))
        files = translate.queue_files(case, hosts, cluster.queue_template(), list(pes))
        for text in files.values():
            cluster.qconf_file("-Aq", text)
        for text in case.get("quota_sets", []):
            cluster.qconf_file("-Arqs", translate.map_hosts_in_text(text, hosts))
    except cluster.GridEngineError as error:
        # qconf refused what the case asks for: the case's fault, and the next case's
        # reset clears what was set up.
        raise translate.CaseError(
            f"Grid Engine refused the case's configuration: {error}"
        ) from None
    instances = [f"{q['name'].partition('@')[0]}@{hosts[q['host']]}" for q in c.get("queues", [])]
    cluster.wait_for_queues(instances)
    for command in translate.queue_states(case, hosts):
        cluster.run(command)
    scheduler = cluster.set_scheduler(case.get("scheduler", {}))
    loads: dict[str, dict[str, str]] = {}
    given = translate.host_values(case, "load_values")
    for logical, value in pinned.items():
        given[logical] = {**given.get(logical, {}), "np_load_avg": value}
    for logical, values in given.items():
        name = "global" if logical == "global" else hosts[logical]
        real = cluster.reported_loads(name).get("num_proc", "1")
        loads[name] = translate.sensor_values(values, float(real))
    if loads:
        cluster.write_loads(loads)
        cluster.wait_for_loads(loads)
    for user in sorted(translate.users_of(case)):
        cluster.ensure_user(user)
    submitted = [cluster.submit(job) for job in jobs]
    ids = [jid for jid, _ in submitted if jid is not None]
    snap, reasons = cluster.release_and_wait(ids)
    answer: list[dict[str, Any]] = []
    for jid, refusal in submitted:
        if jid is None:
            answer.append(
                {
                    "submit": "rejected",
                    "assignment": None,
                    "master_queue": None,
                    "reject_reason": translate.logical_text(refusal, hosts),
                }
            )
            continue
        slots = snap.slots.get(jid)
        master = snap.master.get(jid)
        answer.append(
            {
                "submit": "accepted",
                "assignment": None
                if slots is None
                else {translate.logical_queue(q, hosts): n for q, n in sorted(slots.items())},
                "master_queue": None if master is None else translate.logical_queue(master, hosts),
                "pending_reasons": [translate.logical_text(r, hosts) for r in reasons.get(jid, [])],
            }
        )
    cluster.delete_jobs()
    return answer, scheduler, pinned


def referee(case: Mapping[str, Any], make_database: Callable[[], Database]) -> Verdict:
    """Both answers of a case and whether they agree."""
    case_id = str(case["id"])
    try:
        check_case(case)
        ge, scheduler, pinned = gridengine_answer(case)
    except ScenarioError as error:
        return Verdict(case_id, "case error", str(error))
    except translate.NotRefereeable as error:
        return Verdict(case_id, "not refereeable", str(error))
    except translate.CaseError as error:
        return Verdict(case_id, "case error", str(error))
    verdict = Verdict(case_id, "agree", gridengine=ge, scheduler=scheduler, pinned=pinned)
    database = make_database()
    try:
        verdict.jobmatch = jobmatch_answer(database, case)
    except Exception as error:  # a case jobmatch cannot run is that case's failure
        verdict.status = "failed"
        verdict.detail = f"jobmatch raised {type(error).__name__}: {error}"
        return verdict
    finally:
        database.dispose()
    if compared(ge) != verdict.jobmatch:
        verdict.status = "DIFFER"
        if gives_documented_answer(case, verdict.jobmatch):
            verdict.status = "documented divergence"
            verdict.detail = str(case["divergence"])
    return verdict


def vector(case: Mapping[str, Any], verdict: Verdict, version: str) -> dict[str, Any]:
    """A recorded line: the case's inputs and Grid Engine's answer with its provenance;
    a documented divergence's ``divergence``/``jobmatch_answer`` are kept from the case."""
    uname = platform.uname()
    return {
        **inputs(case),
        "gridengine": {
            "version": version,
            "uname": f"{uname.system} {uname.release} {uname.machine}",
            "scheduler": verdict.scheduler,
            **({"pinned_np_load_avg": verdict.pinned} if verdict.pinned else {}),
            "recorded": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "answer": {"jobs": verdict.gridengine},
        },
    }


def carried_divergences(path: Path) -> dict[str, dict[str, Any]]:
    """``divergence``/``jobmatch_answer`` of the vectors already in ``path``, by case id,
    so that recording again keeps what the lead documented."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        vector = json.loads(line)
        kept = {k: vector[k] for k in ("divergence", "jobmatch_answer") if k in vector}
        if kept:
            out[str(vector["id"])] = kept
    return out


def describe(verdict: Verdict) -> str:
    if verdict.status == "agree":
        return f"{verdict.id}: agree"
    if verdict.status == "DIFFER":
        return (
            f"{verdict.id}: DIFFER\n"
            f"  gridengine: {json.dumps(compared(verdict.gridengine), sort_keys=True)}\n"
            f"  jobmatch:   {json.dumps(verdict.jobmatch, sort_keys=True)}"
        )
    return f"{verdict.id}: {verdict.status}: {verdict.detail}"
