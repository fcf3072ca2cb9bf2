"""A Grid Engine scenario case (app/matching/gridengine/scenarios.py, with the #36
extensions) as the files and command lines that set it up on a real Grid Engine: the
attribute table for ``qconf -Mc``, queue, parallel environment, host group, project and
exec host files for ``qconf -A*``/``-Me``, quota set texts for ``qconf -Arqs`` and the
``qsub`` arguments of each job. Pure: no process is run here.

Logical host names (``h1``, ``h2``, ...) become the machine's names through ``hosts``
(a mapping the referee builds from the hosts it has); queue instance names come back
through :func:`logical_queue`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The scenario format's default job owner (app/matching/gridengine/scenarios.py
#: ``_submit``: ``spec.get("user", "scenario")``); the installer creates that Unix user.
DEFAULT_USER = "scenario"

#: The parallel environments' ``slots`` (sge_pe(5)): as many as jobmatch's scenarios give
#: theirs (``upsert_pe(..., 9_999_999)``), so that a PE never limits a case.
PE_SLOTS = 9_999_999

#: Access lists every Grid Engine installation has (sge_conf(5), the package's bootstrap);
#: the reset leaves them.
STOCK_ACCESS_LISTS = frozenset({"arusers", "deadlineusers", "defaultdepartment"})

_COMPLEX_COLUMNS = (
    "name",
    "shortcut",
    "type",
    "relop",
    "requestable",
    "consumable",
    "default",
    "urgency",
)


class CaseError(Exception):
    """The case cannot be set up on Grid Engine as written (an attribute of the format
    the referee does not translate, a malformed value): a fault of the case, reported
    for it, not a disagreement."""


class NotRefereeable(Exception):
    """The case needs something this machine does not have (e.g. a second execution
    host): it is counted apart, never as agreement."""


@dataclass(frozen=True)
class Job:
    """One job of a case: its owner and the ``qsub`` arguments before the command."""

    user: str
    args: tuple[str, ...]


def jobs_of(case: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(case["jobs"]) if "jobs" in case else [case["job"]]


def logical_hosts(case: Mapping[str, Any]) -> list[str]:
    """Every logical host a case names, in first-mention order."""
    cluster = case["cluster"]
    names: list[str] = []
    for host in cluster.get("hosts", []):
        names.append(host["name"])
    for queue in cluster.get("queues", []):
        names.append(queue["host"])
    for members in cluster.get("host_groups", {}).values():
        names.extend(m for m in members if not m.startswith("@"))
    return list(dict.fromkeys(names))


def host_map(case: Mapping[str, Any], available: Mapping[str, str]) -> dict[str, str]:
    """Logical host -> machine host name; NotRefereeable when one is missing."""
    needed = logical_hosts(case)
    missing = [h for h in needed if h not in available]
    if missing:
        raise NotRefereeable(
            f"needs execution host(s) {', '.join(missing)}; this machine has "
            f"{', '.join(sorted(available)) or 'none'}"
        )
    return {h: available[h] for h in needed}


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def values_text(values: Mapping[str, Any] | None) -> str:
    """``complex_values``/``load_thresholds`` as queue_conf(5) writes them; NONE if empty."""
    if not values:
        return "NONE"
    return ",".join(f"{k}={_value_text(v)}" for k, v in values.items())


def _row_text(row: Mapping[str, Any]) -> str:
    consumable = row["consumable"]
    if isinstance(consumable, bool):
        consumable = "YES" if consumable else "NO"
    requestable = row["requestable"]
    if isinstance(requestable, bool):
        requestable = "YES" if requestable else "NO"
    cells = [
        str(row["name"]),
        str(row["shortcut"]),
        str(row["type"]),
        str(row["relop"]),
        str(requestable),
        str(consumable),
        _value_text(row["default"]),
        _value_text(row.get("urgency", 0)),
    ]
    return " ".join(cells)


def parse_complexes(text: str) -> dict[str, dict[str, str]]:
    """``qconf -sc`` output -> name -> row (comment lines skipped)."""
    rows: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split()
        if len(cells) != len(_COMPLEX_COLUMNS):
            raise CaseError(f"complex table line {line!r}: expected {len(_COMPLEX_COLUMNS)} cells")
        rows[cells[0]] = dict(zip(_COMPLEX_COLUMNS, cells, strict=True))
    return rows


def complex_table(stock: str, case: Mapping[str, Any]) -> str | None:
    """The attribute table for ``qconf -Mc``: the stock table with ``complex_mod`` rows
    merged into theirs and ``complex_add`` rows appended; None when the case changes
    nothing."""
    if not case.get("complex_mod") and not case.get("complex_add"):
        return None
    rows: dict[str, Mapping[str, Any]] = dict(parse_complexes(stock))
    for mod in case.get("complex_mod", []):
        name = mod["name"]
        current = rows.get(name) or next((r for r in rows.values() if r["shortcut"] == name), None)
        if current is None:
            raise CaseError(f"complex_mod names {name!r}, which is not a stock attribute")
        rows[current["name"]] = {**current, **mod, "name": current["name"]}
    for add in case.get("complex_add", []):
        missing = [c for c in _COMPLEX_COLUMNS if c not in add and c != "urgency"]
        if missing:
            raise CaseError(f"complex_add row {add.get('name')!r} lacks {', '.join(missing)}")
        rows[add["name"]] = add
    return "".join(_row_text(row) + "\n" for row in rows.values())


def _per_host(values: Sequence[tuple[str, str]]) -> str:
    """A cluster queue attribute from its instances' values: the first instance's as the
    default, ``[host=value]`` for every instance that differs (queue_conf(5))."""
    default = values[0][1]
    overrides = [f"[{host}={value}]" for host, value in values if value != default]
    return ",".join([default, *overrides])


def pe_names(case: Mapping[str, Any]) -> dict[str, str]:
    """Parallel environment name -> allocation rule, named as jobmatch's scenarios name
    them (``pe<index>`` when the job gives no name)."""
    pes: dict[str, str] = {}
    for index, spec in enumerate(jobs_of(case)):
        pe = spec.get("pe")
        if pe is None:
            continue
        name = str(pe.get("name", f"pe{index}"))
        rule = str(pe.get("allocation_rule", "$fill_up"))
        if pes.get(name, rule) != rule:
            raise CaseError(f"parallel environment {name!r} is given two allocation rules")
        pes[name] = rule
    return pes


def pe_file(name: str, rule: str) -> str:
    return (
        f"pe_name {name}\nslots {PE_SLOTS}\nuser_lists NONE\nxuser_lists NONE\n"
        "start_proc_args NONE\nstop_proc_args NONE\n"
        f"allocation_rule {rule}\ncontrol_slaves FALSE\njob_is_first_task TRUE\n"
        "urgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n"
    )


_QUEUE_KEYS = frozenset(
    {"name", "host", "slots", "seq_no", "complex_values", "load_thresholds", "state", "attributes"}
)


def queue_files(
    case: Mapping[str, Any], hosts: Mapping[str, str], template: str, pes: Sequence[str]
) -> dict[str, str]:
    """Cluster queue name -> its ``qconf -Aq`` file, made from ``template`` (``qconf -sq``
    without a name). Every parallel environment of the case is in every queue's pe_list,
    as jobmatch's scenarios let every queue take every PE. ``load_thresholds`` is NONE
    unless the case sets it (the template's np_load_avg=1.75 would put instances of a
    busy host in alarm)."""
    instances: dict[str, list[Mapping[str, Any]]] = {}
    for queue in case["cluster"].get("queues", []):
        unknown = set(queue) - _QUEUE_KEYS - {"used", "used_nonexclusive"}
        if unknown:
            raise CaseError(f"queue {queue['name']}: keys {sorted(unknown)} are not translated")
        if queue.get("used") or queue.get("used_nonexclusive"):
            raise CaseError(f"queue {queue['name']}: 'used' bookings cannot be set up")
        cq, _, host = queue["name"].partition("@")
        if host != queue["host"]:
            raise CaseError(f"queue {queue['name']} is not on its host {queue['host']!r}")
        instances.setdefault(cq, []).append(queue)
    files: dict[str, str] = {}
    for cq, members in instances.items():
        fields = {
            "qname": cq,
            "hostlist": " ".join(hosts[q["host"]] for q in members),
            "seq_no": _per_host([(hosts[q["host"]], str(q.get("seq_no", 0))) for q in members]),
            "slots": _per_host([(hosts[q["host"]], str(int(q["slots"]))) for q in members]),
            "complex_values": _per_host(
                [(hosts[q["host"]], values_text(q.get("complex_values"))) for q in members]
            ),
            "load_thresholds": _per_host(
                [(hosts[q["host"]], q.get("load_thresholds") or "NONE") for q in members]
            ),
            "pe_list": " ".join(pes) or "NONE",
        }
        # Built-in queue attributes (h_rt, h_vmem, ...) are queue_conf(5) fields of their own.
        template_keys = {line.split(None, 1)[0] for line in template.splitlines() if line.strip()}
        for name in dict.fromkeys(k for q in members for k in q.get("attributes") or {}):
            if name not in template_keys or name in fields:
                raise CaseError(f"queue {cq}: attribute {name!r} is not a queue_conf(5) limit")
            fields[name] = _per_host(
                [
                    (hosts[q["host"]], str((q.get("attributes") or {}).get(name, "INFINITY")))
                    for q in members
                ]
            )
        lines = []
        for line in template.splitlines():
            key = line.split(None, 1)[0] if line.strip() else ""
            lines.append(f"{key} {fields[key]}" if key in fields else line)
        files[cq] = "\n".join(lines) + "\n"
    return files


def queue_states(case: Mapping[str, Any], hosts: Mapping[str, str]) -> list[list[str]]:
    """``qmod`` command lines for queue instances in state ``disabled``/``suspended``."""
    commands = []
    for queue in case["cluster"].get("queues", []):
        state = queue.get("state")
        if state is None:
            continue
        flag = {"disabled": "-d", "suspended": "-s"}.get(state)
        if flag is None:
            raise CaseError(f"queue {queue['name']}: state {state!r} is not disabled/suspended")
        cq = queue["name"].partition("@")[0]
        commands.append(["qmod", flag, f"{cq}@{hosts[queue['host']]}"])
    return commands


def exec_host_file(name: str, complex_values: Mapping[str, Any] | None) -> str:
    """An exec host (or ``global``) for ``qconf -Me`` with these complex_values."""
    return (
        f"hostname {name}\nload_scaling NONE\ncomplex_values {values_text(complex_values)}\n"
        "user_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\n"
        "usage_scaling NONE\nreport_variables NONE\n"
    )


def host_values(case: Mapping[str, Any], field: str) -> dict[str, Mapping[str, Any]]:
    """Logical host (or ``global``) -> its ``complex_values``/``load_values``."""
    cluster = case["cluster"]
    out: dict[str, Mapping[str, Any]] = {}
    if cluster.get("global", {}).get(field):
        out["global"] = cluster["global"][field]
    for host in cluster.get("hosts", []):
        if host.get(field):
            out[host["name"]] = host[field]
        if field == "load_values" and host.get("attributes"):
            # A host's built-in values (arch, num_proc, mem_total, ...) come from its execd's
            # load report, which the load sensor overrides (measured for arch and num_proc).
            out[host["name"]] = {**host["attributes"], **out.get(host["name"], {})}
        if host.get("used") or host.get("used_nonexclusive"):
            raise CaseError(f"host {host['name']}: 'used' bookings cannot be set up")
    if cluster.get("global", {}).get("used"):
        raise CaseError("global: 'used' bookings cannot be set up")
    return out


#: Load values the execd computes from others: np_load_X = load_X / num_proc (measured:
#: a load sensor's np_load_avg is overwritten by the execd's quotient, its load_avg and
#: num_proc are taken).
_PER_PROCESSOR = {
    "np_load_avg": "load_avg",
    "np_load_short": "load_short",
    "np_load_medium": "load_medium",
    "np_load_long": "load_long",
}


def sensor_values(values: Mapping[str, Any], num_proc: float) -> dict[str, str]:
    """A host's ``load_values`` as the load sensor must report them: np_load_* through
    load_* times num_proc (the case's num_proc if it gives one, else the host's)."""
    n = float(values.get("num_proc", num_proc))
    out: dict[str, str] = {}
    for name, value in values.items():
        if name in _PER_PROCESSOR:
            out[_PER_PROCESSOR[name]] = repr(float(value) * n)
        else:
            out[name] = _value_text(value)
    if any(name in _PER_PROCESSOR for name in values):
        out.setdefault("num_proc", _value_text(n))
    return out


def host_group_file(name: str, members: Sequence[str], hosts: Mapping[str, str]) -> str:
    listed = [m if m.startswith("@") else hosts[m] for m in members]
    return f"group_name {name}\nhostlist {' '.join(listed) or 'NONE'}\n"


def project_file(name: str) -> str:
    return f"name {name}\noticket 0\nfshare 0\nacl NONE\nxacl NONE\n"


def map_hosts_in_text(text: str, hosts: Mapping[str, str]) -> str:
    """Logical host names as whole words (``hosts {h1}``, ``all.q@h2``) -> machine names."""
    if not hosts:
        return text
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, hosts)) + r")(?![\w.-])")
    return pattern.sub(lambda m: hosts[m.group(1)], text)


def logical_text(text: str, hosts: Mapping[str, str]) -> str:
    """The reverse of :func:`map_hosts_in_text`, for Grid Engine's answers."""
    return map_hosts_in_text(text, {real: logical for logical, real in hosts.items()})


def logical_queue(name: str, hosts: Mapping[str, str]) -> str:
    cq, _, host = name.partition("@")
    back = {real: logical for logical, real in hosts.items()}
    return f"{cq}@{back.get(host, host)}"


def _request_list(pairs: Sequence[Sequence[Any]]) -> str:
    return ",".join(
        str(name) if value is None else f"{name}={_value_text(value)}" for name, value in pairs
    )


def _queue_list(items: str | Sequence[str], hosts: Mapping[str, str]) -> str:
    text = items if isinstance(items, str) else ",".join(items)
    return map_hosts_in_text(text, hosts)


_JOB_KEYS = frozenset(
    {
        "hard",
        "soft",
        "pe",
        "slots",
        "hard_queue_list",
        "master_queue_list",
        "soft_queue_list",
        "user",
        "project",
        "verify",
    }
)


def qsub_jobs(case: Mapping[str, Any], hosts: Mapping[str, str]) -> list[Job]:
    """Each job's owner and qsub arguments (hard requests and queue lists before
    ``-soft``, which makes every later ``-l``/``-q`` soft: qsub(1))."""
    out = []
    for index, spec in enumerate(jobs_of(case)):
        unknown = set(spec) - _JOB_KEYS - {"title", "note"}
        if unknown:
            raise CaseError(f"job {index + 1}: keys {sorted(unknown)} are not translated")
        args: list[str] = []
        if spec.get("hard"):
            args += ["-l", _request_list(spec["hard"])]
        if spec.get("hard_queue_list"):
            args += ["-q", _queue_list(spec["hard_queue_list"], hosts)]
        if spec.get("master_queue_list"):
            args += ["-masterq", _queue_list(spec["master_queue_list"], hosts)]
        pe = spec.get("pe")
        if pe is not None:
            name = str(pe.get("name", f"pe{index}"))
            args += ["-pe", name, str(spec.get("slots", pe.get("slots", 1)))]
        elif int(spec.get("slots", 1)) != 1:
            raise CaseError(f"job {index + 1}: 'slots' without a parallel environment")
        if spec.get("project"):
            args += ["-P", str(spec["project"])]
        if spec.get("verify"):
            args += ["-w", str(spec["verify"])]
        soft: list[str] = []
        if spec.get("soft"):
            soft += ["-l", _request_list(spec["soft"])]
        if spec.get("soft_queue_list"):
            soft += ["-q", _queue_list(spec["soft_queue_list"], hosts)]
        if soft:
            args += ["-soft", *soft]
        out.append(Job(str(spec.get("user", DEFAULT_USER)), tuple(args)))
    return out


def users_of(case: Mapping[str, Any]) -> set[str]:
    users = {str(spec.get("user", DEFAULT_USER)) for spec in jobs_of(case)}
    for members in case["cluster"].get("access_lists", {}).values():
        users.update(m for m in members if not m.startswith("@"))
    return users


def _uses_load(case: Mapping[str, Any]) -> bool:
    """Whether a case's outcome may depend on its hosts' load: load figures of its own
    (load_*, np_load_*; a num_proc is kept, the pin is reported through it), load
    thresholds or a load-based queue sort."""
    cluster = case["cluster"]
    if case.get("scheduler", {}).get("queue_sort_method", "seqno") != "seqno":
        return True
    if any(q.get("load_thresholds") for q in cluster.get("queues", [])):
        return True
    levels = [cluster.get("global") or {}, *cluster.get("hosts", [])]
    return any(
        name.startswith(("load_", "np_load_"))
        for level in levels
        for name in level.get("load_values") or {}
    )


def _tied_groups(case: Mapping[str, Any]) -> list[tuple[int, list[Mapping[str, Any]]]]:
    """The queue instances of equal seq_no on more than one host, per seq_no."""
    by_seq: dict[int, list[Mapping[str, Any]]] = {}
    for queue in case["cluster"].get("queues", []):
        by_seq.setdefault(int(queue.get("seq_no", 0)), []).append(queue)
    return [
        (seq_no, group) for seq_no, group in by_seq.items() if len({q["host"] for q in group}) > 1
    ]


#: The np_load_avg the referee gives the k-th host (k = 0, 1, ...) of a case that says
#: nothing about load: low enough for no threshold, apart enough to order the hosts.
PINNED_LOAD_STEP = 0.01


def pinned_loads(case: Mapping[str, Any]) -> dict[str, float]:
    """np_load_avg per logical host that makes Grid Engine's load order of the hosts the
    case's list order, for a case whose outcome does not depend on load (empty otherwise,
    or when no order of the hosts fits every seq_no's list order)."""
    if _uses_load(case):
        return {}
    hosts = logical_hosts(case)
    before: dict[str, set[str]] = {h: set() for h in hosts}
    for _seq_no, group in _tied_groups(case):
        order = list(dict.fromkeys(q["host"] for q in group))
        for i, host in enumerate(order):
            before[host].update(order[:i])
    placed: list[str] = []
    while len(placed) < len(hosts):
        ready = [h for h in hosts if h not in placed and before[h] <= set(placed)]
        if not ready:
            return {}
        placed.append(ready[0])
    return {host: round(PINNED_LOAD_STEP * (k + 1), 6) for k, host in enumerate(placed)}


def tie_problem(case: Mapping[str, Any], pinned: Mapping[str, float]) -> str | None:
    """Whether Grid Engine's queue sort can reproduce the case's list order.

    jobmatch sorts queue instances by seq_no and breaks ties by the case's list order.
    Grid Engine 8.1.9 with ``queue_sort_method seqno`` sorts by seq_no, then by the host's
    load (load_formula), then keeps qmaster's list order, which is the order the cluster
    queues were created in (measured here: cases B04 and B18 of basics.jsonl; the referee
    creates them in the order of their first instance in the case). So instances with
    equal seq_no on one host come in list order, and on different hosts in the order of
    the hosts' np_load_avg: the case's own, or ``pinned`` (:func:`pinned_loads`), which
    must increase strictly in list order."""
    if case.get("scheduler", {}).get("queue_sort_method", "seqno") != "seqno":
        return None
    loads = {
        h["name"]: (h.get("load_values") or {}).get("np_load_avg")
        for h in case["cluster"].get("hosts", [])
    }
    for host, value in pinned.items():
        loads.setdefault(host, value)
        if loads[host] is None:
            loads[host] = value
    for seq_no, group in _tied_groups(case):
        hosts = list(dict.fromkeys(q["host"] for q in group))
        names = ", ".join(q["name"] for q in group)
        host_loads = [loads.get(h) for h in hosts]
        if any(v is None for v in host_loads):
            return (
                f"queue instances {names} have seq_no {seq_no} on different hosts: Grid "
                "Engine orders them by their hosts' load, which the case does not give"
            )
        numbers = [float(str(v)) for v in host_loads]
        if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
            return (
                f"queue instances {names} have seq_no {seq_no} on hosts whose np_load_avg "
                "is not strictly increasing in list order"
            )
        first_host = [q["host"] for q in group]
        if first_host != sorted(first_host, key=hosts.index):
            return f"queue instances {names} with seq_no {seq_no} interleave their hosts"
    return None
