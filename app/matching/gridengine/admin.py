"""Administrative changes to Grid Engine's attribute table and values, with their
consequences: stored values re-normalised when an attribute compares differently, and
new worker generations and misfit rows when the static picture changes.

A use-case module: it calls the misfit stage, which the table and value modules (read
by that stage's clauses) must not, so that no import cycle hides inside a function.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.db.models import Attribute, AttributeValue, CategoryRequest, Worker
from app.matching import announce
from app.matching.gridengine.table import update_attribute
from app.matching.gridengine.values import (
    ADMIN,
    Target,
    refresh_effective,
    replace_values,
    string_subject,
)
from app.matching.misfits import recache_worker_misfits
from app.notations.gridengine.definitions import ComplexDefinition
from app.notations.gridengine.string_regex import request_regex


def change_attribute(session: Session, name: str, definition: ComplexDefinition) -> Attribute:
    """Replace attribute ``name`` by ``definition`` (the name itself cannot change)."""
    attribute, renormalise = update_attribute(session, name, definition)
    if renormalise:
        _renormalise(session, attribute, definition)
    announce.everything_changed(session)
    return attribute


def _renormalise(session: Session, attribute: Attribute, definition: ComplexDefinition) -> None:
    """Stored strings and regexes follow the (string) type; effective flags follow the
    relop. Every worker's fit may change, so all are recomputed."""
    for value in session.scalars(
        select(AttributeValue).where(AttributeValue.attribute_id == attribute.id)
    ):
        if value.string is not None:
            value.string = string_subject(definition.type, value.text)
    for request in session.scalars(
        select(CategoryRequest).where(CategoryRequest.attribute_id == attribute.id)
    ):
        if request.regex is not None:
            request.regex = request_regex(definition.type, request.text)
    refresh_effective(session, attribute.id)
    session.execute(update(Worker).values(generation=Worker.generation + 1))
    session.flush()
    for worker_id in session.scalars(select(Worker.id).order_by(Worker.id)):
        recache_worker_misfits(session, worker_id)


#: The kinds of values an object carries (``PUT /v1/values/...``'s fields), in the order
#: a change applies them.
VALUE_KINDS = ("complex_values", "load_values", "attributes")


def apply_values(
    session: Session, target: Target, values: Mapping[str, Mapping[str, str] | None]
) -> bool:
    """Each kind of :data:`VALUE_KINDS` that ``values`` gives replaces that kind at
    ``target``; a kind it omits (or gives as None) stays. Returns whether the static
    picture changed."""
    changed = False
    for kind in VALUE_KINDS:
        given = values.get(kind)
        if given is not None:
            changed = set_values(session, target, kind, given) or changed
    return changed


def set_values(
    session: Session,
    target: Target,
    field: str,
    values: Mapping[str, str],
    *,
    recache: bool = True,
    source: str = ADMIN,
) -> bool:
    """Replace the values of one kind (``complex_values``, ``load_values`` or
    ``attributes``) that ``source`` (an administrator, or the worker's load report) wrote
    at ``target``. Returns whether the static picture changed (and the misfit rows were
    recomputed when ``recache``)."""
    static_changed = replace_values(session, target, field, values, source=source)
    if static_changed and recache:
        bump_and_recache(session, target)
    # Load values and consumable capacities change what fits now, static or not.
    if target.worker_id is None:
        announce.everything_changed(session)
    else:
        announce.workers_changed(session, [target.worker_id])
    return static_changed


def bump_and_recache(session: Session, target: Target) -> None:
    """The object's static values changed: its worker (all workers for the global level)
    gets a new generation and new misfit rows."""
    if target.level == "global":
        worker_ids = list(session.scalars(select(Worker.id).order_by(Worker.id)))
    else:
        assert target.worker_id is not None
        worker_ids = [target.worker_id]
    session.execute(
        update(Worker).where(Worker.id.in_(worker_ids)).values(generation=Worker.generation + 1)
    )
    session.flush()
    for worker_id in worker_ids:
        recache_worker_misfits(session, worker_id)
