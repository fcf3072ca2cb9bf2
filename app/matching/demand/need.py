"""What starting every waiting job of a category at once would take: slots, nodes and the
vertices of the nodes' inventories (what the category's jobspec asks per node, stored as
its node needs by app/matching/allocation/inventory.py)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Category, CategoryNodeNeed
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


def category_need(category: Category, waiting: int, nodes: int, per_node: dict[str, int]) -> Need:
    """What ``waiting`` jobs of the category take at once (a job on several nodes counts
    each node)."""
    job_nodes = max(nodes, 1)
    return Need(
        slots=waiting * job_slots(category),
        nodes=waiting * job_nodes,
        vertices={name: amount * job_nodes * waiting for name, amount in per_node.items()},
    )
