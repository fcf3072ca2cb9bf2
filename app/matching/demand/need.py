"""What starting every waiting job of a category at once would take: slots, nodes, the
vertices of the nodes' inventories (what the category's jobspec asks per node, stored as
its node needs by app/matching/allocation/inventory.py) and the Grid Engine consumables
its jobs request (``-l``), booked as app/matching/gridengine/bookings.py books them."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Category, CategoryNodeNeed
from app.matching.gridengine.decide import category_lists
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import Consumable, Relop
from app.wire.demand import Need


def job_slots(category: Category) -> int:
    """The slots one job of the category books: a parallel environment's least, else the
    request's slots (what a submission stores as the job's slots)."""
    return category.pe_min if category.pe is not None and category.pe_min else category.slots


def vertex_name(type_: str, unit: str) -> str:
    return f"{type_} ({unit})" if unit else type_


def node_needs(session: Session, category_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Per category, what one node of a job must hold, by ``type`` or ``type (unit)``."""
    found: dict[int, dict[str, int]] = {}
    ids = sorted(set(category_ids))
    if not ids:
        return found
    rows = session.execute(
        select(
            CategoryNodeNeed.category_id,
            CategoryNodeNeed.type,
            CategoryNodeNeed.unit,
            CategoryNodeNeed.amount,
        ).where(CategoryNodeNeed.category_id.in_(ids))
    )
    for category_id, type_, unit, amount in rows:
        found.setdefault(category_id, {})[vertex_name(type_, unit)] = int(amount)
    return found


def job_consumables(category: Category, table: ComplexTable) -> dict[str, float]:
    """What one job of the category books of the consumables its hard ``-l`` list asks
    for: a per-slot (YES) amount times its slots, a per-job (JOB) amount once, an
    exclusive (EXCL) request one object held whole. Defaults of attributes it does not
    ask for are left out: they are booked only where a host or queue has the attribute,
    which is the cluster's configuration, not the job's request."""
    if category.hard == "NONE":
        return {}
    hard, _soft = category_lists(table, category.hard, "NONE")
    booked: dict[str, float] = {}
    for request in hard.requests:
        definition = table.lookup(request.name)
        if definition is None or not definition.is_consumable:
            continue
        if definition.relop is Relop.EXCL:
            if request.parsed:
                booked[request.name] = 1.0
            continue
        amount = request.parsed
        if not isinstance(amount, float) or amount == 0:
            continue
        per_slot = definition.consumable is not Consumable.JOB
        booked[request.name] = amount * job_slots(category) if per_slot else amount
    return booked


def category_need(
    category: Category,
    waiting: int,
    nodes: int,
    per_node: dict[str, int],
    consumables: dict[str, float] | None = None,
) -> Need:
    """What ``waiting`` jobs of the category take at once (a job on several nodes counts
    each node); ``consumables`` is what one job books (:func:`job_consumables`)."""
    job_nodes = max(nodes, 1)
    return Need(
        slots=waiting * job_slots(category),
        nodes=waiting * job_nodes,
        vertices={name: amount * job_nodes * waiting for name, amount in per_node.items()},
        consumables={name: amount * waiting for name, amount in (consumables or {}).items()},
    )
