"""Parallel environments and how a job's slots spread over queue instances
(docs/notations/gridengine.md#parallel-environments, sge_pe(5)).

Each fitting queue instance offers ``slots_avail`` slots for this job (its own slot and
consumable capacity); each host offers the minimum of its own capacity and the sum of its
queue instances; the global host caps the total. Hosts are visited in the order of their
first queue instance. The allocation rule decides how many slots each host gives:

* ``$pe_slots``: all slots on one host;
* ``$fill_up``: as many as possible per host, host after host;
* ``$round_robin``: one slot per host per round;
* an integer ``k``: exactly ``k`` slots per host (hosts with fewer are skipped), so the
  slot count must be a multiple of ``k``.

Within a host, queue instances are filled in order. Which instance is the master queue is
app/matching/gridengine/master.py's choose_master(). A slot range ``lo-hi`` takes the
largest count that fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Category, ParallelEnvironment
from app.matching import announce
from app.matching.errors import ConflictError, InvalidFieldError
from app.matching.named_rows import row_by_name, rows_by_name

RULES = ("$pe_slots", "$fill_up", "$round_robin")

#: Stand-in for "unlimited" in slot arithmetic.
UNLIMITED = 1 << 40


def check_rule(rule: str) -> str:
    """An allocation rule as Grid Engine writes it, or InvalidFieldError."""
    if rule in RULES:
        return rule
    # ASCII digits only: str.isdigit also passes '²' and other digits int() refuses (the
    # fuzzer's 500), and a bound keeps int() clear of its 4,300-digit limit.
    if rule.isascii() and rule.isdigit() and len(rule) <= 12 and int(rule) >= 1:
        return str(int(rule))
    raise InvalidFieldError(
        "allocation_rule", f"{rule!r} is not $pe_slots, $fill_up, $round_robin or a number >= 1"
    )


def check_pe_exists(session: Session, name: str) -> ParallelEnvironment:
    pe = session.scalar(select(ParallelEnvironment).where(ParallelEnvironment.name == name))
    if pe is None:
        raise InvalidFieldError("pe", f"no parallel environment named {name!r}")
    return pe


def upsert_pe(
    session: Session, name: str, rule: str, slots: int
) -> tuple[ParallelEnvironment, bool]:
    if slots < 0:
        raise InvalidFieldError("slots", "must be zero or more")
    rule = check_rule(rule)
    pe = session.scalar(select(ParallelEnvironment).where(ParallelEnvironment.name == name))
    created = pe is None
    if pe is None:
        pe = ParallelEnvironment(name=name, allocation_rule=rule, slots=slots)
        session.add(pe)
    else:
        pe.allocation_rule, pe.slots = rule, slots
    announce.everything_changed(session)
    session.flush()
    return pe, created


def list_pes(
    session: Session, *, limit: int | None = None, offset: int = 0
) -> list[ParallelEnvironment]:
    """Parallel environments by name (``limit`` None: all of them)."""
    return rows_by_name(session, ParallelEnvironment, limit=limit, offset=offset)


def get_pe(session: Session, name: str) -> ParallelEnvironment:
    missing = f"no parallel environment named {name!r}"
    return row_by_name(session, ParallelEnvironment, name, missing=missing)


def delete_pe(session: Session, name: str) -> None:
    pe = get_pe(session, name)
    if session.scalar(select(Category.id).where(Category.pe == name).limit(1)) is not None:
        raise ConflictError(f"jobs ask for parallel environment {name!r}")
    session.delete(pe)
    session.flush()


@dataclass(frozen=True)
class Offered:
    """A fitting queue instance with the slots it offers this job and its host's cap."""

    queue_instance_id: int
    host: str
    slots: int
    host_slots: int


def _hosts(offers: Sequence[Offered]) -> list[tuple[str, list[Offered], int]]:
    """Hosts in order of their first queue instance: (host, its instances, capacity)."""
    order: dict[str, list[Offered]] = {}
    for offer in offers:
        order.setdefault(offer.host, []).append(offer)
    return [
        (host, items, min(items[0].host_slots, sum(item.slots for item in items)))
        for host, items in order.items()
    ]


def _fill(items: list[Offered], count: int, into: dict[int, int]) -> None:
    for item in items:
        if count <= 0:
            return
        already = into.get(item.queue_instance_id, 0)
        give = min(item.slots - already, count)
        if give > 0:
            into[item.queue_instance_id] = already + give
            count -= give


def spread_exactly(rule: str, offers: Sequence[Offered], n: int) -> dict[int, int] | None:
    """Queue instance -> slots for exactly ``n`` slots under ``rule``, or None."""
    hosts = _hosts(offers)
    result: dict[int, int] = {}
    if rule == "$pe_slots":
        for _host, items, capacity in hosts:
            if capacity >= n:
                _fill(items, n, result)
                return result
        return None
    if rule == "$fill_up":
        remaining = n
        for _host, items, capacity in hosts:
            give = min(capacity, remaining)
            _fill(items, give, result)
            remaining -= give
            if remaining == 0:
                return result
        return None
    if rule == "$round_robin":
        given = {host: 0 for host, _items, _capacity in hosts}
        remaining = n
        progress = True
        while remaining and progress:
            progress = False
            for host, _items, capacity in hosts:
                if remaining and given[host] < capacity:
                    given[host] += 1
                    remaining -= 1
                    progress = True
        if remaining:
            return None
        for host, items, _capacity in hosts:
            if given[host]:
                _fill(items, given[host], result)
        return result
    per_host = int(rule)
    if n % per_host:
        return None
    remaining = n
    for _host, items, capacity in hosts:
        if remaining and capacity >= per_host:
            _fill(items, per_host, result)
            remaining -= per_host
    return result if remaining == 0 else None


def spread_slots(
    rule: str, offers: Sequence[Offered], low: int, high: int, limit: int
) -> dict[int, int] | None:
    """The largest count in ``low..high`` (and within ``limit``: global and PE caps) that
    the rule can place, as queue instance -> slots; None if none can."""
    total = sum(capacity for _host, _items, capacity in _hosts(offers))
    for n in range(min(high, total, limit), low - 1, -1):
        placed = spread_exactly(rule, offers, n)
        if placed is not None:
            return placed
    return None
