"""Why a worker cannot run a job, clause by clause, in words a person understands.

Pure Python over parsed definitions; the SQL misfit predicates (app/matching/misfits.py)
decide the same thing in bulk, and the tests hold the two to the same answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.db.models import WorkerState
from app.matching import liveness
from app.notations.debusine.metadata import ALLOWLIST, Requirement, describe_failure, task_allowed
from app.notations.flux.constraints import (
    And,
    Constraint,
    Hosts,
    Not,
    Or,
    Properties,
    Ranks,
    Target,
    constraint_to_json,
    matches,
)
from app.notations.momotor.groups import ResourceGroup
from app.notations.momotor.items import ResourceItem
from app.notations.momotor.resources import Resources
from app.wire.explanation import Clause
from app.words import plural


def _items(resources: Resources, name: str) -> dict[str, ResourceItem]:
    group = resources.get(name)
    if not isinstance(group, ResourceGroup):
        return {}
    return {item.value: item for item in group.items}


def _mode_word(item: ResourceItem) -> str:
    return "required" if item.required else "excluded" if item.excluded else "optional"


def tag_clauses(job: Resources, worker: Resources) -> list[Clause]:
    """Every NoMatch cell of Momotor's match table that this pair hits."""
    clauses: list[Clause] = []
    names = list(dict.fromkeys([*job.group_names(), *worker.group_names()]))
    for name in names:
        job_items, worker_items = _items(job, name), _items(worker, name)
        for value, mine in job_items.items():
            theirs = worker_items.get(value)
            shown = f"{name}: {mine.as_str()}"
            if mine.required and theirs is None:
                clauses.append(
                    Clause(
                        "job-requires-tag",
                        f"the job requires tag {value!r} in "
                        f"group {name!r}; the worker does not offer it",
                        name,
                        shown,
                    )
                )
            elif mine.required and theirs is not None and theirs.excluded:
                clauses.append(
                    Clause(
                        "job-requires-tag",
                        f"the job requires tag {value!r} in group {name!r}; the worker excludes it",
                        name,
                        shown,
                    )
                )
            elif mine.optional and theirs is not None and theirs.excluded:
                clauses.append(
                    Clause(
                        "worker-excludes-tag",
                        f"the job asks for optional tag "
                        f"{value!r} in group {name!r}; the worker excludes it",
                        name,
                        shown,
                    )
                )
            elif mine.excluded and theirs is not None and not theirs.excluded:
                clauses.append(
                    Clause(
                        "job-excludes-tag",
                        f"the job excludes tag {value!r} in "
                        f"group {name!r}; the worker offers it "
                        f"({_mode_word(theirs)})",
                        name,
                        shown,
                    )
                )
        for value, theirs in worker_items.items():
            mine_or_none = job_items.get(value)
            if theirs.required and (mine_or_none is None or mine_or_none.excluded):
                clauses.append(
                    Clause(
                        "worker-requires-tag",
                        f"the worker only runs jobs that "
                        f"ask for tag {value!r} in group {name!r}; this job "
                        f"does not",
                        name,
                        f"{name}: {theirs.as_str()}",
                    )
                )
    return clauses


def slot_clauses(job_slots: int, largest_queue_instance: int) -> list[Clause]:
    if largest_queue_instance >= job_slots:
        return []
    return [
        Clause(
            "too-few-slots",
            f"the job needs {plural(job_slots, 'slot')}; the worker's largest "
            f"queue instance has {largest_queue_instance}",
        )
    ]


def inventory_clauses(
    needs: dict[tuple[str, str], int], totals: dict[tuple[str, str], int] | None
) -> list[Clause]:
    """What one node must have for the job (per type and pool unit) against everything the
    worker's inventory has; ``totals`` None for a worker without an inventory."""
    if totals is None:
        return []
    clauses = []
    for (type_, unit), amount in sorted(needs.items()):
        have = totals.get((type_, unit), 0)
        if have < amount:
            what = f"{type_} ({unit})" if unit else type_
            clauses.append(
                Clause(
                    "inventory-too-small",
                    f"the job needs {amount} {what} on one node; the worker's inventory "
                    f"has {have} in all",
                )
            )
    return clauses


def bare_worker_clauses(min_nodes: int, cores_alone: int | None, slots: int) -> list[Clause]:
    """Why a worker without an inventory, which offers ``node/[core=<slots>]`` and nothing
    else (issue 35), can never hold a job with a shape or jobspec: the job needs several
    nodes (only an allocation on workers with inventories places those), asks for
    something other than cores (a GPU, a pool), or for more cores than its slots."""
    offer = f"node/[core={slots}]"
    if min_nodes > 1:
        return [
            Clause(
                "needs-several-nodes",
                f"the job needs {min_nodes} nodes: it runs only on {min_nodes} distinct "
                f"workers with inventories, placed together by an allocation; this worker "
                f"has no inventory (it offers {offer}) and takes part in none",
            )
        ]
    if cores_alone is None:
        return [
            Clause(
                "inventory-too-small",
                f"the job asks for more than cores (a GPU, a pool or another resource); "
                f"this worker has no inventory and offers {offer} and nothing else",
            )
        ]
    if cores_alone > slots:
        return [
            Clause(
                "inventory-too-small",
                f"the job needs {cores_alone} cores on one node; this worker has no "
                f"inventory and offers {offer} (its largest queue instance's slots)",
            )
        ]
    return []


def state_clauses(state: WorkerState) -> list[Clause]:
    if state is WorkerState.OFFLINE:
        return [Clause("worker-offline", "the worker is offline")]
    if state is WorkerState.DISABLED:
        return [Clause("worker-disabled", "an administrator disabled the worker")]
    if state is WorkerState.UNKNOWN:
        return [Clause(liveness.REASON_CODE, liveness.MEANING)]
    return []


def _why_not(node: Constraint, target: Target) -> list[str]:
    """Sentences for the parts of a failing constraint that fail on ``target``."""
    if isinstance(node, And):
        return [
            why
            for term in node.terms
            if not matches(term, target)
            for why in _why_not(term, target)
        ]
    if isinstance(node, Or):
        return [
            "none of these alternatives holds: "
            + "; ".join(json.dumps(constraint_to_json(t)) for t in node.terms)
        ]
    if isinstance(node, Not):
        return [f"it must not hold, but does: {json.dumps(constraint_to_json(node.term))}"]
    if isinstance(node, Properties):
        have = set(target.properties) | ({target.hostname} if target.hostname else set())
        missing = sorted(node.required - have)
        present = sorted(node.forbidden & have)
        reasons = [f"the worker lacks property {name!r}" for name in missing]
        reasons += [
            f"the worker has property {name!r}, which the job forbids (^{name})" for name in present
        ]
        return reasons
    if isinstance(node, Hosts):
        lists = ", ".join(str(hostlist) for hostlist in node.hostlists) or "(empty)"
        return [f"the worker's name {target.hostname!r} is not in hostlist {lists}"]
    assert isinstance(node, Ranks)
    if target.rank is None:
        return [f"the worker has no rank; the job asks for ranks {node.ids.encode() or '(empty)'}"]
    return [f"the worker's rank {target.rank} is not in ranks {node.ids.encode() or '(empty)'}"]


def constraint_clauses(tree: Constraint, target: Target) -> list[Clause]:
    """The RFC 31 constraint's failing parts, or nothing when it holds."""
    if matches(tree, target):
        return []
    return [Clause("constraint", f"constraint: {why}") for why in _why_not(tree, target)] or [
        Clause("constraint", "the job's constraint does not hold on this worker")
    ]


def task_clauses(
    task: str,
    version: int,
    requirements: Requirement | None,
    static: Mapping[str, Any],
    versions: Mapping[str, int],
    metadata: Mapping[str, Any],
) -> list[Clause]:
    """Why the worker cannot run a job of ``task`` (debusine issue #8): allow/deny, version,
    requirements; the reason codes of the misfit CASE."""
    clauses: list[Clause] = []
    if not task_allowed(task, static):
        why = (
            "tasks_allowlist does not name it" if ALLOWLIST in static else "it is in tasks_denylist"
        )
        clauses.append(Clause("task-denied", f"task {task} is denied on this worker: {why}"))
    reported = versions.get(task)
    if reported is None:
        clauses.append(
            Clause(
                "task-version",
                f"worker has not reported {task} metadata, task needs version {version}",
            )
        )
    elif reported != version:
        clauses.append(
            Clause(
                "task-version",
                f"worker reports {task} version {reported}, task needs {version}",
            )
        )
    if requirements is not None:
        clauses += [
            Clause("task-requirements", f"task {task}: {why}")
            for why in describe_failure(requirements, metadata)
        ]
    return clauses


def plugin_clause(task: str, plugin: str) -> Clause:
    return Clause(
        "task-plugin", f"task {task}'s can_run_on (plug-in {plugin!r}) refuses this worker"
    )
