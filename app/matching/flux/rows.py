"""RFC 14 resources lists as rows: one per vertex, depth first, for inspection in SQL and
for the coarse filtering of the allocation that a later issue builds on them."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from app.db.models import ResourceVertex
from app.notations.flux import jobspec as rfc14
from app.notations.flux.ranges import count_to_json, count_values


def store_resource_vertices(session: Session, category_id: int, resources: rfc14.Resources) -> None:
    rows: list[dict[str, Any]] = []

    def visit(vertices: rfc14.Resources, parent: int | None, depth: int) -> None:
        for vertex in vertices:
            position = len(rows)
            rows.append(
                {
                    "category_id": category_id,
                    "position": position,
                    "parent_position": parent,
                    "depth": depth,
                    "type": vertex.type,
                    "count": json.dumps(count_to_json(vertex.count), sort_keys=True),
                    "min_count": next(iter(count_values(vertex.count))),
                    "label": vertex.label,
                    "exclusive": vertex.exclusive,
                    "unit": vertex.unit,
                }
            )
            visit(vertex.with_, position, depth + 1)

    visit(resources, None, 0)
    if rows:
        session.execute(insert(ResourceVertex), rows)
