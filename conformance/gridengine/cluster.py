"""The real Grid Engine through its commands (qconf, qsub, qrls, qmod, qstat, qdel): reset
to a clean state, set up from files, submit, wait for the scheduler's decision and read it.

Every command runs with ``SGE_ROOT``/``SGE_CELL`` of the Debian packages; a command that
fails raises :class:`GridEngineError` with its output, except where a refusal is an answer
(``qsub``: the submission was rejected).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conformance.gridengine import translate

SGE_ROOT = "/var/lib/gridengine"
SGE_CELL = "default"
STATE = Path(os.environ.get("JOBMATCH_CONFORMANCE_STATE", "/var/lib/jobmatch-conformance"))
LOAD_FILE = STATE / "loads"

#: The scheduler configuration of every case (sched_conf(5)), recorded with the vectors.
#: Urgency, tickets and waiting time weigh nothing, so pending jobs are dispatched in
#: submission order as jobmatch's scenarios dispatch them in list order (Grid Engine's
#: default urgency gives a parallel job 1000 per slot and reorders it first); no load
#: adjustment, so a job just placed does not make its host look loaded to the next one;
#: a scheduling run every second, and schedd_job_info for the pending reasons.
SCHEDULER = {
    "schedule_interval": "0:0:1",
    "queue_sort_method": "seqno",
    "load_formula": "np_load_avg",
    "job_load_adjustments": "NONE",
    "load_adjustment_decay_time": "0:0:0",
    "schedd_job_info": "true",
    "flush_submit_sec": "1",
    "flush_finish_sec": "1",
    "weight_urgency": "0.000000",
    "weight_ticket": "0.000000",
    "weight_waiting_time": "0.000000",
    "max_reservation": "0",
}


class GridEngineError(Exception):
    """A Grid Engine command failed where the referee needs it to succeed (the cluster
    could not be reset or set up, a daemon is not answering): the harness's failure."""


def env() -> dict[str, str]:
    return {**os.environ, "SGE_ROOT": SGE_ROOT, "SGE_CELL": SGE_CELL}


def run(args: Sequence[str], *, check: bool = True, cwd: str = "/tmp") -> tuple[int, str]:
    """Run a command; its exit code and its stdout+stderr."""
    proc = subprocess.run(
        list(args), env=env(), cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    output = proc.stdout + proc.stderr
    if check and proc.returncode != 0:
        raise GridEngineError(f"{' '.join(args)}: exit {proc.returncode}: {output.strip()}")
    return proc.returncode, output


def lines(args: Sequence[str]) -> list[str]:
    """A ``qconf -s*l`` list; empty when Grid Engine says there is none."""
    code, output = run(args, check=False)
    if code != 0:
        return []
    return [line.strip() for line in output.splitlines() if line.strip()]


def qconf_file(option: str, text: str, *extra: str) -> str:
    """``qconf <option> <file>`` with ``text`` in the file."""
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as handle:
        handle.write(text)
        path = handle.name
    try:
        return run(["qconf", option, path, *extra])[1]
    finally:
        os.unlink(path)


def version() -> str:
    return run(["dpkg-query", "-W", "-f=${Version}", "gridengine-master"])[1].strip()


def exec_hosts() -> list[str]:
    return [h for h in lines(["qconf", "-sel"]) if h]


def up_hosts() -> list[str]:
    """The exec hosts whose execd reports load (``qhost``: a stopped execd's load is ``-``)."""
    root = ET.fromstring(run(["qhost", "-xml"])[1])
    up = []
    for host in root.iter("host"):
        values = {v.get("name"): v.text for v in host.iter("hostvalue")}
        if host.get("name") != "global" and values.get("load_avg") not in (None, "-"):
            up.append(host.get("name") or "")
    return up


def stock_complexes() -> str:
    path = STATE / "complexes.stock"
    if not path.exists():
        raise GridEngineError(f"{path} is missing: run conformance/gridengine/install.sh")
    return path.read_text()


def queue_template() -> str:
    return run(["qconf", "-sq"])[1]


# -- reset ------------------------------------------------------------------------------


def all_job_ids() -> list[str]:
    root = ET.fromstring(run(["qstat", "-u", "*", "-xml"])[1])
    return sorted({e.text or "" for e in root.iter("JB_job_number")}, key=int)


def delete_jobs() -> None:
    ids = all_job_ids()
    if not ids:
        return
    run(["qdel", "-f", ",".join(ids)], check=False)
    deadline = time.monotonic() + 30
    while all_job_ids():
        if time.monotonic() > deadline:
            raise GridEngineError(f"jobs {all_job_ids()} are still there 30 s after qdel -f")
        time.sleep(0.3)


def reset(hosts: Sequence[str]) -> None:
    """No jobs, quota sets, queues, PEs, host groups, projects or access lists of ours; no
    complex_values on the exec hosts and global; the stock attribute table; the base
    scheduler configuration; no load values."""
    write_loads({})
    delete_jobs()
    for name in lines(["qconf", "-srqsl"]):
        run(["qconf", "-drqs", name])
    for name in lines(["qconf", "-sql"]):
        run(["qconf", "-dq", name])
    for name in lines(["qconf", "-spl"]):
        run(["qconf", "-dp", name])
    for name in lines(["qconf", "-shgrpl"]):
        run(["qconf", "-dhgrp", name])
    for name in lines(["qconf", "-sprjl"]):
        run(["qconf", "-dprj", name])
    for name in lines(["qconf", "-sul"]):
        if name not in translate.STOCK_ACCESS_LISTS:
            run(["qconf", "-dul", name])
    for host in ["global", *hosts]:
        qconf_file("-Me", translate.exec_host_file(host, None))
    # The scheduler first: qmaster refuses to delete an attribute its load_formula names.
    set_scheduler({})
    set_complexes(stock_complexes(), wait=15)


def set_complexes(table: str, wait: float = 0) -> None:
    """The attribute table, unless it is already. With ``wait``, an attribute the previous
    case's load sensor still reports (qmaster refuses to delete it while a host's load
    values name it) is retried until the next load reports drop it."""
    current = run(["qconf", "-sc"])[1]
    if translate.parse_complexes(current) == translate.parse_complexes(table):
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            qconf_file("-Mc", table)
            return
        except GridEngineError as error:
            if "still referenced" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def set_scheduler(overrides: Mapping[str, str]) -> dict[str, str]:
    """The base scheduler configuration with the case's overrides; returns what was set."""
    wanted = {**SCHEDULER, **{k: str(v) for k, v in overrides.items()}}
    current = run(["qconf", "-ssconf"])[1]
    out = []
    seen = set()
    for line in current.splitlines():
        key = line.split(None, 1)[0] if line.strip() else ""
        if key in wanted:
            out.append(f"{key:34}{wanted[key]}")
            seen.add(key)
        else:
            out.append(line)
    unknown = set(wanted) - seen
    if unknown:
        raise translate.CaseError(f"scheduler settings {sorted(unknown)} do not exist")
    qconf_file("-Msconf", "\n".join(out) + "\n")
    return wanted


def write_loads(loads: Mapping[str, Mapping[str, object]]) -> None:
    """The load sensor's file: ``host:name:value`` lines (``global`` for global values)."""
    STATE.mkdir(parents=True, exist_ok=True)
    text = "".join(
        f"{host}:{name}:{value}\n"
        for host, values in loads.items()
        for name, value in values.items()
    )
    tmp = LOAD_FILE.with_suffix(".tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    tmp.replace(LOAD_FILE)


def reported_loads(host: str) -> dict[str, str]:
    """The load values qmaster has for an exec host (``qconf -se``)."""
    text = run(["qconf", "-se", host])[1]
    joined = text.replace("\\\n", "")
    for line in joined.splitlines():
        if line.startswith("load_values"):
            items = line.split(None, 1)[1].replace(" ", "").split(",")
            return dict(item.split("=", 1) for item in items if "=" in item)
    return {}


def _same(reported: str, wanted: str) -> bool:
    """A reported load value is the wanted one (numbers within the report's 6 decimals;
    memory values carry a unit suffix and are compared as text)."""
    try:
        return abs(float(reported) - float(wanted)) < 1e-5
    except ValueError:
        return reported == wanted


def wait_for_loads(loads: Mapping[str, Mapping[str, object]], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        missing = []
        for host, values in loads.items():
            have = reported_loads(host)
            for name, value in values.items():
                if name not in have or not _same(have[name], str(value)):
                    missing.append(f"{host}:{name}={value} (reported {have.get(name)})")
        if not missing:
            return
        if time.monotonic() > deadline:
            raise GridEngineError(f"load sensor values not reported: {', '.join(missing)}")
        time.sleep(0.5)


def wait_for_queues(names: Sequence[str], timeout: float = 20) -> None:
    """Until every queue instance is known to qmaster with its execd up (no ``u``)."""
    deadline = time.monotonic() + timeout
    while True:
        root = ET.fromstring(run(["qstat", "-f", "-u", "*", "-xml"])[1])
        states = {
            (q.findtext("name") or ""): (q.findtext("state") or "") for q in root.iter("Queue-List")
        }
        bad = [n for n in names if n not in states or "u" in states[n]]
        if not bad:
            return
        if time.monotonic() > deadline:
            raise GridEngineError(f"queue instances not up: {bad} ({states})")
        time.sleep(0.3)


# -- jobs -------------------------------------------------------------------------------


def ensure_user(name: str) -> None:
    """A case's job owner as a Unix user (install.sh makes the usual ones; a case may name
    others): created when missing, with a home directory (a job starts in it; without
    one the job goes into error state, Eqw)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        run(["useradd", "-m", "-s", "/bin/sh", name])


def submit(job: translate.Job) -> tuple[str | None, str]:
    """``qsub -h`` as the job's owner: (job id, '') or (None, qsub's refusal)."""
    args = [
        "runuser",
        "-u",
        job.user,
        "--",
        "env",
        f"SGE_ROOT={SGE_ROOT}",
        f"SGE_CELL={SGE_CELL}",
        "qsub",
        "-terse",
        "-h",
        "-b",
        "y",
        "-o",
        "/dev/null",
        "-e",
        "/dev/null",
        *job.args,
        "sleep",
        "3600",
    ]
    code, output = run(args, check=False)
    if code != 0:
        return None, " ".join(output.split())
    return output.strip().splitlines()[-1].strip(), ""


@dataclass
class Snapshot:
    """What Grid Engine shows for the case's jobs at one moment."""

    slots: dict[str, dict[str, int]] = field(default_factory=dict)
    master: dict[str, str] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    states: dict[str, str] = field(default_factory=dict)

    def key(self) -> tuple[object, ...]:
        return (
            sorted((j, sorted(s.items())) for j, s in self.slots.items()),
            sorted(self.master.items()),
            sorted(self.pending),
            sorted(self.states.items()),
        )


def snapshot() -> Snapshot:
    """Slots per queue instance (``qstat -f``: a job's slots in each instance), master
    queue (``qstat -g t``: the instance whose task is MASTER) and pending jobs."""
    snap = Snapshot()
    full = ET.fromstring(run(["qstat", "-f", "-u", "*", "-xml"])[1])
    for queue in full.iter("Queue-List"):
        qname = queue.findtext("name") or ""
        for job in queue.iter("job_list"):
            jid = job.findtext("JB_job_number") or ""
            slots = int(job.findtext("slots") or "0")
            snap.slots.setdefault(jid, {})[qname] = slots
            snap.states[jid] = job.findtext("state") or ""
    for job in full.iter("job_list"):
        if job.get("state") == "pending":
            jid = job.findtext("JB_job_number") or ""
            snap.pending.add(jid)
            snap.states[jid] = job.findtext("state") or ""
    tasks = ET.fromstring(run(["qstat", "-g", "t", "-u", "*", "-xml"])[1])
    for job in tasks.iter("job_list"):
        if (job.findtext("master") or "").strip() == "MASTER":
            snap.master[job.findtext("JB_job_number") or ""] = job.findtext("queue_name") or ""
    return snap


def pending_reasons(job_id: str) -> list[str]:
    """``qstat -j``'s scheduling info lines of a pending job (schedd_job_info true)."""
    _code, output = run(["qstat", "-j", job_id], check=False)
    reasons: list[str] = []
    inside = False
    for line in output.splitlines():
        if line.startswith("scheduling info:"):
            inside = True
            line = line.split(":", 1)[1]
        elif inside and line and not line[0].isspace():
            break
        if inside and line.strip():
            reasons.append(line.strip())
    return reasons


def release_and_wait(
    ids: Sequence[str], timeout: float = 40
) -> tuple[Snapshot, dict[str, list[str]]]:
    """Release the held jobs together and wait for the scheduler's decision: every job
    placed, or the same snapshot three polls (1.5 s) running, at least 3 s after the
    release (three scheduling intervals), with every pending job's scheduling info."""
    if not ids:
        return Snapshot(), {}
    run(["qrls", ",".join(ids)])
    start = time.monotonic()
    previous: tuple[object, ...] | None = None
    stable = 0
    while True:
        time.sleep(0.5)
        snap = snapshot()
        failed = [j for j in ids if "E" in snap.states.get(j, "")]
        if failed:
            # Dispatched, but the execd could not start it: not a scheduling answer.
            reasons = {j: pending_reasons(j) for j in failed}
            raise translate.CaseError(f"jobs went into error state (Eqw): {reasons}")
        placed = all(j in snap.slots and "t" not in snap.states.get(j, "") for j in ids)
        key = snap.key()
        stable = stable + 1 if key == previous else 0
        previous = key
        if placed and stable >= 1:
            return snap, {}
        if stable >= 3 and time.monotonic() - start >= 3:
            reasons = {j: pending_reasons(j) for j in ids if j not in snap.slots}
            if all(reasons.values()):
                return snap, reasons
        if time.monotonic() - start > timeout:
            raise GridEngineError(f"no stable scheduling decision {timeout} s after qrls")
