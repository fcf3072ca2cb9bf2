"""Resource quota sets at dispatch (``sge_resource_quota(5)``; Grid Engine 6.2's
``sge_resource_quota_schedd.c``): which rule of each enabled set applies to a job on a queue
instance, how much of each limit the job would take, and the books.

For every queue instance a job could get, each enabled set contributes its first rule
whose filters match the job's user, project and PE and the instance's queue and host; the
rule's limits then cap the instance (``floor(remaining / per-slot amount)`` slots; for a
parallel job a per-job consumable's limit caps no slots and, used up, only keeps the
instance from being the master), and a chosen assignment must fit every limit with the
amounts of all its instances summed per usage key. A job's amount of a limit is, per
instance: its slots for ``slots``, its request (or the attribute's default) times its
slots for a per-slot consumable, the request once on the master queue for a per-job
(``JOB``) consumable.

The books are rows of ``quota_usage`` (one per limit and usage key, made when first
needed) and ``quota_bookings`` (what each running job holds). A dispatch writes them with
guarded UPDATEs (``used + amount <= limit``) after its slots and consumables, in the same
savepoint: the guard is checked on the row's latest version, so concurrent pulls on
PostgreSQL cannot overbook a quota; a guard that fails undoes the dispatch. The end of a
job (finish, cancel, requeue, lease expiry) gives its amounts back with its consumables
(:func:`release_quota_bookings`, called by ``release_bookings``).

A job's project is its ``qsub -P`` (None without: a ``projects`` filter then matches as
for a job without ``-P``, ``!*`` and exclusions match, names and ``*`` do not); ``@``
items of ``users`` and ``hosts`` name the access lists and host groups of
``state.groups`` (app/matching/gridengine/groups.py loads them when a set names one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from sqlalchemy import bindparam, case, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import Attribute, QuotaBooking, QuotaLimit, QuotaUsage
from app.db.models import QuotaSet as QuotaSetRow
from app.matching.errors import ConflictError
from app.matching.gridengine.state import ClusterState, QueueSlot
from app.matching.held_bookings import ended_jobs_holding
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import Consumable
from app.notations.gridengine.evaluator import FitCode, Level, QueueFit
from app.notations.gridengine.quota_parser import parse_quota_set
from app.notations.gridengine.quotas import Limit, QuotaGroups, QuotaSet
from app.notations.gridengine.requests import RequestList

#: What a job of no project presents to a ``projects`` filter.
NO_PROJECT: str | None = None
#: Matching without loaded groups (no ``@`` item names any).
_NO_GROUPS = QuotaGroups()


@lru_cache(maxsize=256)
def _parsed(text: str) -> QuotaSet:
    """A stored set's text parsed again (it was validated when it was written)."""
    return parse_quota_set(text)


@dataclass(frozen=True)
class _LoadedSet:
    name: str
    definition: QuotaSet
    #: (rule index, attribute name) -> quota_limits id
    limit_ids: Mapping[tuple[int, str], int]
    #: (rule index, attribute name) -> the static limit in base units (None: dynamic)
    numbers: Mapping[tuple[int, str], float | None]


@dataclass(frozen=True)
class QuotaAmount:
    """What a job takes of one limit under one usage key."""

    limit_id: int
    key: str
    attribute: str
    amount: float
    #: The limit's value for this key (static, or the dynamic one of the key's host).
    limit: float
    rule_label: str


@dataclass(frozen=True)
class _Applying:
    """A limit that applies to a job of some owner and PE on one queue instance."""

    limit_id: int
    key: str
    attribute: str
    limit: float
    rule_label: str
    #: The rule applies to every owner alike (its set's first rule, without a users
    #: filter): when it leaves nothing, it leaves nothing to anyone.
    shared: bool = False


@dataclass
class QuotaBook:
    """The enabled sets and the current usage, loaded once per pull or scheduling run;
    a run keeps its own bookings in ``used`` until it writes them."""

    sets: list[_LoadedSet]
    #: (limit id, key) -> used
    used: dict[tuple[int, str], float] = field(default_factory=dict)
    #: (limit id, key) -> amount booked in memory by a scheduling run, not written yet
    pending: dict[tuple[int, str], float] = field(default_factory=dict)
    pending_jobs: list[tuple[int, list[QuotaAmount]]] = field(default_factory=list)
    #: (owner, project, PE, queue instance id) -> the limits that apply there: the first
    #: matching rule of every set, worked out once per book (a run asks for every job).
    applying: dict[tuple[str, str | None, str | None, int], tuple[_Applying, ...]] = field(
        default_factory=dict
    )
    #: Instances a quota left nothing, per ((owner, project) or None for everyone, PE,
    #: request list, queue instance id): usage only grows during a pull or a run, so they
    #: stay so.
    blocked: dict[tuple[tuple[str, str | None] | None, str | None, int, int], QueueFit] = field(
        default_factory=dict
    )

    def for_job(
        self,
        state: ClusterState,
        user: str,
        pe: str | None,
        hard: RequestList,
        *,
        project: str | None = NO_PROJECT,
    ) -> JobQuotas:
        return JobQuotas(self, state, user, pe, hard, project)

    def apply(self, amounts: Iterable[QuotaAmount], sign: float = 1.0) -> None:
        for amount in amounts:
            key = (amount.limit_id, amount.key)
            self.used[key] = self.used.get(key, 0.0) + sign * amount.amount


def load_quota_book(session: Session) -> QuotaBook | None:
    """The enabled sets and their usage; None when no set is enabled (then dispatch pays
    nothing more than this one statement)."""
    rows = session.execute(
        select(QuotaSetRow.id, QuotaSetRow.name, QuotaSetRow.text)
        .where(QuotaSetRow.enabled.is_(True))
        .order_by(QuotaSetRow.id)
    ).all()
    if not rows:
        return None
    set_ids = [row.id for row in rows]
    limits: dict[int, dict[tuple[int, str], int]] = {set_id: {} for set_id in set_ids}
    numbers: dict[int, dict[tuple[int, str], float | None]] = {set_id: {} for set_id in set_ids}
    for limit_id, set_id, rule_index, attribute, number in session.execute(
        select(
            QuotaLimit.id,
            QuotaLimit.set_id,
            QuotaLimit.rule_index,
            Attribute.name,
            QuotaLimit.number,
        )
        .join(Attribute, Attribute.id == QuotaLimit.attribute_id)
        .where(QuotaLimit.set_id.in_(set_ids))
    ):
        limits[set_id][rule_index, attribute] = limit_id
        numbers[set_id][rule_index, attribute] = number
    used: dict[tuple[int, str], float] = {}
    for limit_id, key, amount in session.execute(
        select(QuotaUsage.limit_id, QuotaUsage.key, QuotaUsage.used)
        .join(QuotaLimit, QuotaLimit.id == QuotaUsage.limit_id)
        .where(QuotaLimit.set_id.in_(set_ids))
    ):
        used[limit_id, key] = amount
    loaded = [
        _LoadedSet(row.name, _parsed(row.text), limits[row.id], numbers[row.id]) for row in rows
    ]
    return QuotaBook(loaded, used)


def loaded_set(session: Session, set_id: int, name: str, definition: QuotaSet) -> _LoadedSet:
    """One stored set with its limit rows (a set just written, before it is enabled in a
    loaded book)."""
    limit_ids: dict[tuple[int, str], int] = {}
    numbers: dict[tuple[int, str], float | None] = {}
    for limit_id, rule_index, attribute, number in session.execute(
        select(QuotaLimit.id, QuotaLimit.rule_index, Attribute.name, QuotaLimit.number)
        .join(Attribute, Attribute.id == QuotaLimit.attribute_id)
        .where(QuotaLimit.set_id == set_id)
    ):
        limit_ids[rule_index, attribute] = limit_id
        numbers[rule_index, attribute] = number
    return _LoadedSet(name, definition, limit_ids, numbers)


def _host_numbers(state: ClusterState, worker_id: int) -> dict[str, float]:
    """A host's numeric values for dynamic limits: load values, then fixed values (the
    configured value wins, as in the within-object merge), over the global host's (Grid
    Engine 6.2u5 and 8.1.9 get_load_value() in source/libs/sched/sort_hosts.c looks the
    attribute up with get_attribute_by_name(global, host, ...), so a value only the global
    host has counts too)."""
    host = state.hosts.get(worker_id)
    numbers: dict[str, float] = {}
    if host is None:
        return numbers
    glob = state.global_host
    for source in (glob.load_values, glob.complex_values, host.load_values, host.complex_values):
        for name, text in source.items():
            try:
                numbers[state.table[name].name] = float(text)
            except (KeyError, ValueError):
                continue
    return numbers


class JobQuotas:
    """One job's view of the quota book: caps per queue instance, the check of a whole
    assignment, and the amounts it would book."""

    def __init__(
        self,
        book: QuotaBook,
        state: ClusterState,
        user: str,
        pe: str | None,
        hard: RequestList,
        project: str | None = NO_PROJECT,
    ) -> None:
        self._book = book
        self._state = state
        self.user = user
        self.project = project
        self.pe = pe
        self._hard = hard
        self._per_slot_amounts: dict[str, tuple[float, bool]] = {}
        #: The last limit that stopped the job, in Grid Engine's words.
        self.refusal: str | None = None

    def _applying(self, slot: QueueSlot) -> tuple[_Applying, ...]:
        cache_key = (self.user, self.project, self.pe, slot.id)
        found = self._book.applying.get(cache_key)
        if found is None:
            queue = slot.name.partition("@")[0]
            groups = self._groups()
            entries = []
            for loaded in self._book.sets:
                for index, rule in enumerate(loaded.definition.rules):
                    if not rule.matches(self.user, self.project, self.pe, queue, slot.host, groups):
                        continue
                    key = rule.usage_key(self.user, self.project, self.pe, queue, slot.host)
                    label = loaded.definition.rule_label(index)
                    for limit in rule.limits:
                        number = loaded.numbers.get((index, limit.attribute))
                        entries.append(
                            _Applying(
                                loaded.limit_ids[index, limit.attribute],
                                key,
                                limit.attribute,
                                self._limit_value(number, limit, slot),
                                label,
                                index == 0 and rule.users is None and rule.projects is None,
                            )
                        )
                    break  # the first matching rule of a set is the one that applies
            found = self._book.applying[cache_key] = tuple(entries)
        return found

    def _groups(self) -> QuotaGroups:
        groups = self._state.groups
        return _NO_GROUPS if groups is None else groups.for_quotas()

    def _per_slot(self, table: ComplexTable, attribute: str) -> tuple[float, bool]:
        """(amount, per job) of an attribute the job takes per slot, or once when per job."""
        found = self._per_slot_amounts.get(attribute)
        if found is not None:
            return found
        if attribute == "slots":
            found = (1.0, False)
        else:
            definition = table[attribute]
            request = self._hard.get(definition.name)
            value = request.parsed if request is not None else definition.default_value
            amount = float(value) if isinstance(value, float | int) else 0.0
            found = (amount, definition.consumable is Consumable.JOB)
        self._per_slot_amounts[attribute] = found
        return found

    def amounts(self, assignment: Mapping[int, int], master: int) -> list[QuotaAmount]:
        """What the assignment takes of every applying limit, one entry per instance."""
        table = self._state.table
        result: list[QuotaAmount] = []
        for qi_id, count in assignment.items():
            for entry in self._applying(self._state.slots[qi_id]):
                per, per_job = self._per_slot(table, entry.attribute)
                amount = (per if qi_id == master else 0.0) if per_job else per * count
                result.append(
                    QuotaAmount(
                        entry.limit_id,
                        entry.key,
                        entry.attribute,
                        amount,
                        entry.limit,
                        entry.rule_label,
                    )
                )
        return result

    def _limit_value(self, number: float | None, limit: Limit, slot: QueueSlot) -> float:
        if not limit.dynamic:
            return -1.0 if number is None else number
        # A host without a value the limit names gets ERROR_LOAD_VAL (value_for()).
        value = limit.value_for(_host_numbers(self._state, slot.worker_id))
        return -1.0 if value is None else value

    def _remaining(self, amount: QuotaAmount) -> float:
        return amount.limit - self._book.used.get((amount.limit_id, amount.key), 0.0)

    def _caps_slots(self, amount: QuotaAmount) -> bool:
        """Whether a limit caps the slots an instance gives. A per-job (JOB) consumable's
        does not for a parallel job: Grid Engine 6.2u5 and 8.1.9 ri_slots_by_time()
        (source/libs/sched/sge_select_queue.c) answers INT_MAX slots for CONSUMABLE_JOB
        below the global layer, and the quota layer is below it; a used-up limit only
        keeps the instance from being the master (:meth:`master_refusal`). A sequential
        job's one instance is its master, so there the limit caps it as any other."""
        if self.pe is None or amount.attribute == "slots":
            return True
        return not self._per_slot(self._state.table, amount.attribute)[1]

    def master_refusal(self, slot: QueueSlot) -> QueueFit | None:
        """A parallel job's refusal of the instance as master when a per-job (JOB)
        consumable's limit cannot take the job's request there (the job's request is
        debited once, at the master: rqs_debit_rule_usage()), else None. Grid Engine
        6.2u5 and 8.1.9 parallel_rc_slots_by_time() untags such an instance as master
        (QU_tagged4schedule) and lets it take slave tasks."""
        if self.pe is None:
            return None
        for amount in self.amounts({slot.id: 1}, slot.id):
            if self._caps_slots(amount) or amount.amount <= 0:
                continue
            if amount.amount > self._remaining(amount) + 1e-9:
                self.refusal = _message(amount)
                return QueueFit(
                    slot.name, False, Level.QUEUE, FitCode.QUOTA_EXCEEDED, None, self.refusal
                )
        return None

    def _cap(self, slot: QueueSlot) -> tuple[float, QuotaAmount | None]:
        """How many slots the applying limits leave on the instance, and the tightest
        limit."""
        cap = math.inf
        tightest = None
        for amount in self.amounts({slot.id: 1}, slot.id):
            if not self._caps_slots(amount):
                continue
            remaining = self._remaining(amount)
            if amount.amount <= 0:
                allowed = math.inf if remaining >= 0 else 0.0
            else:
                allowed = math.floor(remaining / amount.amount + 1e-9)
            if allowed < cap:
                cap, tightest = allowed, amount
        return cap, tightest

    def blocked(self, slot: QueueSlot) -> QueueFit | None:
        """The instance's failure when the quotas leave it nothing, else None: a run that
        only needs a verdict skips evaluating its values then."""
        cache = self._book.blocked
        hard = id(self._hard)
        mine = (self.user, self.project)
        for owner in (None, mine):
            found = cache.get((owner, self.pe, hard, slot.id))
            if found is not None:
                self.refusal = found.message
                return found
        cap, tightest = self._cap(slot)
        if cap >= 1 or tightest is None:
            return None
        self.refusal = _message(tightest)
        fit = QueueFit(slot.name, False, Level.QUEUE, FitCode.QUOTA_EXCEEDED, None, self.refusal)
        shared = any(
            entry.shared and entry.limit_id == tightest.limit_id for entry in self._applying(slot)
        )
        cache[None if shared else mine, self.pe, hard, slot.id] = fit
        return fit

    def limit_fit(self, slot: QueueSlot, fit: QueueFit) -> QueueFit:
        """A fitting instance's verdict with the quotas: its ``queue_slots`` capped by what
        the applying limits leave, or a failure in Grid Engine's words when none is left."""
        cap, tightest = self._cap(slot)
        refusal = None if tightest is None else _message(tightest)
        if cap >= 1:
            if cap == math.inf:
                return fit
            capped = int(cap) if fit.queue_slots is None else min(fit.queue_slots, int(cap))
            return QueueFit(
                fit.queue,
                True,
                global_slots=fit.global_slots,
                host_slots=fit.host_slots,
                queue_slots=capped,
                soft_violations=fit.soft_violations,
                soft_violations_naive=fit.soft_violations_naive,
            )
        self.refusal = refusal
        return QueueFit(fit.queue, False, Level.QUEUE, FitCode.QUOTA_EXCEEDED, None, refusal)

    def check(self, assignment: Mapping[int, int], master: int) -> list[QuotaAmount] | None:
        """The amounts of a whole assignment, or None when, summed per usage key, they
        exceed a limit (``refusal`` then says which)."""
        amounts = self.amounts(assignment, master)
        totals: dict[tuple[int, str], float] = {}
        for amount in amounts:
            key = (amount.limit_id, amount.key)
            totals[key] = totals.get(key, 0.0) + amount.amount
        for amount in amounts:
            if totals[amount.limit_id, amount.key] > self._remaining(amount) + 1e-9:
                self.refusal = _message(amount)
                return None
        return [a for a in amounts if a.amount > 0]


def _message(amount: QuotaAmount) -> str:
    """``qstat -j``'s line for a job a quota stops (MSG_SCHEDD_INFO_CANNOTRUNRQSGLOBAL_SS)."""
    return f'cannot run because it exceeds limit "{amount.key}" in rule "{amount.rule_label}"'


# ---------------------------------------------------------------------------------------
# The books


def _ensure_usage_rows(
    session: Session, wanted: set[tuple[int, str]]
) -> dict[tuple[int, str], int]:
    """The usage rows of (limit id, key), made with used 0 where missing (concurrent
    dispatches may make the same row: the unique key lets one insert win)."""
    if not wanted:
        return {}
    connection = session.connection()
    insert_into = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    session.execute(
        insert_into(QuotaUsage).on_conflict_do_nothing(index_elements=["limit_id", "key"]),
        [{"limit_id": limit_id, "key": key, "used": 0.0} for limit_id, key in sorted(wanted)],
    )
    ids: dict[tuple[int, str], int] = {}
    limit_ids = sorted({limit_id for limit_id, _key in wanted})
    keys = sorted({key for _limit_id, key in wanted})
    # Both columns narrowed, so that a pull reads its few rows, not every key of a limit.
    for usage_id, limit_id, key in session.execute(
        select(QuotaUsage.id, QuotaUsage.limit_id, QuotaUsage.key).where(
            QuotaUsage.limit_id.in_(limit_ids), QuotaUsage.key.in_(keys)
        )
    ):
        if (limit_id, key) in wanted:
            ids[limit_id, key] = usage_id
    return ids


_BOOK = (
    update(QuotaUsage)
    .where(
        QuotaUsage.id == bindparam("u_id"),
        QuotaUsage.used + bindparam("u_amount") <= bindparam("u_limit"),
    )
    .values(used=QuotaUsage.used + bindparam("u_amount"))
)


def book_quotas(
    session: Session, jobs: list[tuple[int, list[QuotaAmount]]], *, force: bool = False
) -> bool:
    """Book the jobs' amounts: guarded UPDATEs in usage row order (the lock order of
    every quota writer), then the jobs' booking rows. False when a guard fails (the caller
    rolls back its savepoint); ``force`` books past the limits (running jobs counted again
    after a set changed, as Grid Engine counts them: the limit stops new jobs only)."""
    totals: dict[tuple[int, str], tuple[float, float]] = {}
    for _job_id, amounts in jobs:
        for amount in amounts:
            key = (amount.limit_id, amount.key)
            total, _limit = totals.get(key, (0.0, amount.limit))
            totals[key] = (total + amount.amount, amount.limit)
    ids = _ensure_usage_rows(session, set(totals))
    for key in sorted(totals, key=lambda k: ids[k]):
        total, limit = totals[key]
        result = session.execute(
            _BOOK, {"u_id": ids[key], "u_amount": total, "u_limit": math.inf if force else limit}
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            return False
    rows = [
        {"job_id": job_id, "usage_id": ids[a.limit_id, a.key], "amount": a.amount}
        for job_id, amounts in jobs
        for a in amounts
    ]
    if rows:
        session.execute(insert(QuotaBooking), rows)
    return True


def write_run_quotas(session: Session, book: QuotaBook | None) -> None:
    """A scheduling run's quota bookings, at the end of the run (it holds every worker's
    lock, so a guard that fails means an admin changed a set meanwhile: roll back)."""
    if book is None or not book.pending_jobs:
        return
    if not book_quotas(session, book.pending_jobs):
        raise ConflictError("a resource quota changed during the scheduling run")


_HELD = (
    select(QuotaBooking.usage_id, QuotaBooking.amount)
    .where(QuotaBooking.job_id == bindparam("job_id"))
    .order_by(QuotaBooking.usage_id)
)
_GIVE_BACK = (
    update(QuotaUsage)
    .where(QuotaUsage.id == bindparam("g_id"))
    # Sums of floats given back may fall a hair below zero; the CHECK wants used >= 0.
    .values(
        used=case(
            (QuotaUsage.used - bindparam("g_amount") < 1e-9, 0.0),
            else_=QuotaUsage.used - bindparam("g_amount"),
        )
    )
)


def release_quota_bookings(session: Session, job_id: int) -> None:
    """Give back what a job holds of every quota (its end, requeue or lease expiry)."""
    held = session.execute(_HELD, {"job_id": job_id}).all()
    if not held:
        return
    totals: dict[int, float] = {}
    for usage_id, amount in held:
        totals[usage_id] = totals.get(usage_id, 0.0) + amount
    for usage_id in sorted(totals):
        session.execute(_GIVE_BACK, {"g_id": usage_id, "g_amount": totals[usage_id]})
    session.execute(delete(QuotaBooking).where(QuotaBooking.job_id == job_id))


def quota_violations(session: Session, tolerance: float = 1e-6) -> list[str]:
    """The quota books' invariants, in words (``jobmatch db check``): every usage row equals
    what jobs hold of it, and only running jobs hold anything. (A row above its limit is
    no violation: a set written while jobs ran counts them past it.)"""
    problems: list[str] = []
    held = (
        select(func.coalesce(func.sum(QuotaBooking.amount), 0.0))
        .where(QuotaBooking.usage_id == QuotaUsage.id)
        .scalar_subquery()
    )
    for usage_id, key, used, holding in session.execute(
        select(QuotaUsage.id, QuotaUsage.key, QuotaUsage.used, held).order_by(QuotaUsage.id)
    ):
        if abs(used - holding) > tolerance:
            problems.append(
                f"quota usage {usage_id} ({key!r}) says {used:g} but jobs hold {holding:g}"
            )
    problems += ended_jobs_holding(session, QuotaBooking.__table__, "quota booking")
    return problems
