"""Values of complex attributes at the global, host and queue-instance levels.

Three kinds, as Grid Engine has them (docs/notations/gridengine.md#levels-and-the-strict-hierarchy):

* ``complex_values`` (kind ``fixed``): at every level; for a consumable, its capacity,
  which also gets a ``consumable_usage`` row that bookings count against;
* ``load_values`` (kind ``load``): load values, global and host level only. The worker
  reports its own (``PUT /v1/workers/{name}/load``, source ``report``); an administrator
  may set some too (``PUT /v1/values/...``, source ``admin``). Each writer replaces only
  its own rows, so a report never erases what an administrator set; where both give a
  value of one attribute at one object, the administrator's is the one matching sees
  (the report is kept, and shown, but not ``effective``);
* ``attributes`` (kind ``builtin``): the built-in queue attributes of a queue instance
  (``qname``, ``hostname``, ``seq_no``, the limits ``h_rt``, ``h_vmem``, ...). Every
  queue instance gets them when it is created (limits INFINITY); an admin may override
  them, each on its own: the admin's ``attributes`` replace the earlier overrides, and
  every built-in they do not name keeps (or gets back) its created value, so ``qname``
  and ``hostname`` are never lost. ``slots`` stays on ``queue_instances``.

Static values (fixed, builtin, and string load values) are what the misfit cache is
computed from, so changing them bumps the worker's generation (all workers' for the
global level) and recomputes its misfit rows. Numeric load values are dynamic: they are
checked at dispatch time, so reporting a new number changes no generation; a load value
that appears or disappears does (it decides whether an attribute is present), and so does
an administrator's load value that appears or disappears over a reported one (it decides
which of the two matching sees).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import (
    Attribute,
    AttributeValue,
    ConsumableUsage,
    Queue,
    QueueInstance,
    Worker,
)
from app.matching.errors import ConflictError, InvalidFieldError, NotFoundError
from app.matching.gridengine.table import load_table
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import ComplexDefinition, ComplexError
from app.notations.gridengine.evaluator import QUEUE_LIMITS, queue_builtins
from app.notations.gridengine.values import parse_value
from app.notations.quantities import QuantityError, ValueType
from app.wire.values import Consumption, Values

KINDS = {"complex_values": "fixed", "load_values": "load", "attributes": "builtin"}

#: Who writes a row: an administrator, or the worker's own load report.
ADMIN, REPORT = "admin", "report"

#: Built-in queue attributes an admin may set (qname, hostname and slots come from the
#: queue instance itself).
QUEUE_ATTRIBUTES = frozenset(
    {*QUEUE_LIMITS, "seq_no", "rerun", "tmpdir", "calendar", "min_cpu_interval"}
)

#: Precedence within one object for relops == and != (docs/notations/gridengine.md): the
#: administrator's value beats the built-in, which beats a load value; an administrator's
#: load value beats the reported one (which it hides whatever the relop).
_PRECEDENCE = {("fixed", ADMIN): 0, ("builtin", ADMIN): 1, ("load", ADMIN): 2, ("load", REPORT): 3}


def string_subject(value_type: ValueType, text: str) -> str:
    """The string SQL compares: lower-cased for the case-insensitive types."""
    return text.lower() if value_type in (ValueType.CSTRING, ValueType.HOST) else text


@dataclass(frozen=True)
class Target:
    """One object carrying values: the global host, a worker, or a queue instance."""

    level: str
    worker_id: int | None = None
    queue_instance_id: int | None = None

    @property
    def object_key(self) -> int:
        if self.level == "global":
            return 0
        if self.level == "host":
            assert self.worker_id is not None
            return self.worker_id
        assert self.queue_instance_id is not None
        return self.queue_instance_id

    def rows_of(
        self, model: type[AttributeValue] | type[ConsumableUsage]
    ) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
        """The conditions that pick ``model``'s rows at this object."""
        return model.level == self.level, model.object_key == self.object_key


def resolve_target(session: Session, level: str, host: str | None, queue: str | None) -> Target:
    """The object named by an API path: ``global``, a host name, or ``queue@host``."""
    if level == "global":
        return Target("global")
    worker = session.scalar(select(Worker).where(Worker.name == host))
    if worker is None:
        raise NotFoundError(f"no worker named {host!r}")
    if level == "host":
        return Target("host", worker.id)
    qi_id = session.scalar(
        select(QueueInstance.id)
        .join(Queue, Queue.id == QueueInstance.queue_id)
        .where(QueueInstance.worker_id == worker.id, Queue.name == queue)
    )
    if qi_id is None:
        raise NotFoundError(f"no queue instance {queue}@{host}")
    return Target("queue_instance", worker.id, qi_id)


def _row(
    definition: ComplexDefinition,
    attribute_id: int,
    target: Target,
    kind: str,
    text: str,
    source: str = ADMIN,
) -> dict[str, object]:
    role = "capacity" if kind == "fixed" else "load"
    value = parse_value(definition, text, role=role)
    return {
        "attribute_id": attribute_id,
        "level": target.level,
        "object_key": target.object_key,
        "worker_id": target.worker_id,
        "queue_instance_id": target.queue_instance_id,
        "kind": kind,
        "text": text,
        "number": value if isinstance(value, float) else None,
        "string": string_subject(definition.type, value) if isinstance(value, str) else None,
        "effective": True,
        "source": source,
    }


def replace_values(
    session: Session,
    target: Target,
    field: str,
    values: Mapping[str, str],
    *,
    source: str = ADMIN,
) -> bool:
    """Replace the values of one kind (``complex_values``, ``load_values`` or
    ``attributes``) that ``source`` wrote at ``target``: an administrator's leave the
    worker's reported load values alone, a report (``load_values`` of a host only) leaves
    the administrator's alone. Returns whether the static picture changed, which
    app/matching/gridengine/admin.py turns into new misfit rows."""
    kind = KINDS[field]
    if source == REPORT and (kind != "load" or target.level != "host"):
        raise InvalidFieldError(field, "a worker reports the load values of its own host only")
    if kind == "load" and target.level == "queue_instance":
        raise InvalidFieldError(field, "load values live on the global or host level only")
    if kind == "builtin" and target.level != "queue_instance":
        raise InvalidFieldError(field, "built-in queue attributes belong to queue instances")
    table = load_table(session)
    ids = {name: id_ for id_, name in session.execute(select(Attribute.id, Attribute.name))}
    rows: dict[int, dict[str, object]] = {}
    definitions: dict[int, ComplexDefinition] = {}
    for key, text in values.items():
        definition = table.lookup(key)
        if definition is None:
            raise InvalidFieldError(f"{field}.{key}", f"unknown attribute {key!r}")
        if kind == "builtin" and definition.name not in QUEUE_ATTRIBUTES:
            raise InvalidFieldError(
                f"{field}.{key}", f"{definition.name!r} is not a settable queue attribute"
            )
        if definition.name == "slots" and target.level == "queue_instance":
            raise InvalidFieldError(
                f"{field}.{key}", "a queue instance's slots are set with the worker's queues"
            )
        try:
            row = _row(definition, ids[definition.name], target, kind, str(text), source)
        except (QuantityError, ComplexError) as error:
            raise InvalidFieldError(f"{field}.{key}", error.message, error) from error
        rows[ids[definition.name]] = row
        definitions[ids[definition.name]] = definition
    if kind == "builtin":
        # Each built-in queue attribute is its own setting of queue_conf(5): the
        # administrator's list overrides the ones it names and every other built-in keeps
        # the value the instance was created with (qname and hostname above all, which
        # -l q= and -l hostname= match; rows of one kind and source are replaced as a
        # whole, so the kept ones are written again).
        for attribute_id, row in _creation_builtins(session, target, table, ids).items():
            rows.setdefault(attribute_id, row)
    replaced = (
        *target.rows_of(AttributeValue),
        AttributeValue.kind == kind,
        AttributeValue.source == source,
    )
    old = {
        value.attribute_id: value
        for value in session.scalars(select(AttributeValue).where(*replaced))
    }
    static_changed = _static_change(old, rows, kind)
    session.execute(delete(AttributeValue).where(*replaced))
    if rows:
        session.add_all(AttributeValue(**row) for row in rows.values())
    session.flush()
    if kind == "fixed":
        _sync_capacities(session, target, rows, definitions)
    for attribute_id in set(old) | set(rows):
        refresh_effective(session, attribute_id, target)
    return static_changed


def _static_change(
    old: Mapping[int, AttributeValue], new: Mapping[int, Mapping[str, object]], kind: str
) -> bool:
    if set(old) != set(new):
        return True
    if kind == "load":
        # Numbers of load values are dynamic; strings (arch, ...) are static.
        return any(old[key].string != new[key]["string"] for key in new)
    return any(
        (old[key].number, old[key].string) != (new[key]["number"], new[key]["string"])
        for key in new
    )


def _sync_capacities(
    session: Session,
    target: Target,
    rows: Mapping[int, Mapping[str, object]],
    definitions: Mapping[int, ComplexDefinition],
) -> None:
    """Consumable capacities follow the fixed values; a capacity in use cannot go away
    or shrink below its booking (the CHECK refuses, reported as a conflict)."""
    current = {
        usage.attribute_id: usage
        for usage in session.scalars(
            select(ConsumableUsage).where(
                *target.rows_of(ConsumableUsage),
            )
        )
    }
    wanted = {
        attribute_id: float(row["number"])  # type: ignore[arg-type]
        for attribute_id, row in rows.items()
        if definitions[attribute_id].is_consumable
    }
    for attribute_id, usage in current.items():
        if attribute_id not in wanted:
            if usage.used or usage.used_nonexclusive:
                raise ConflictError("a consumable capacity in use cannot be removed")
            session.delete(usage)
    try:
        for attribute_id, capacity in wanted.items():
            existing = current.get(attribute_id)
            if existing is None:
                session.add(
                    ConsumableUsage(
                        attribute_id=attribute_id,
                        level=target.level,
                        object_key=target.object_key,
                        worker_id=target.worker_id,
                        queue_instance_id=target.queue_instance_id,
                        capacity=capacity,
                        used=0.0,
                        used_nonexclusive=0.0,
                    )
                )
            else:
                existing.capacity = capacity
        with session.begin_nested():
            session.flush()
    except IntegrityError as error:
        raise ConflictError("a consumable capacity cannot shrink below its booking") from error


def refresh_effective(session: Session, attribute_id: int, target: Target | None = None) -> None:
    """Recompute which rows matching sees: per object, a reported load value is hidden
    by an administrator's load value of the attribute; for ``==``/``!=`` attributes only
    the row of highest precedence counts (fixed, then builtin, then load: the
    administrator's, then the reported one)."""
    relop = session.scalar(select(Attribute.relop).where(Attribute.id == attribute_id))
    query = select(AttributeValue).where(AttributeValue.attribute_id == attribute_id)
    if target is not None:
        query = query.where(*target.rows_of(AttributeValue))
    by_object: dict[tuple[str, int], list[AttributeValue]] = {}
    for value in session.scalars(query):
        by_object.setdefault((value.level, value.object_key), []).append(value)
    for values in by_object.values():
        values.sort(key=lambda v: _PRECEDENCE[v.kind, v.source])
        admin_load = any(v.kind == "load" and v.source == ADMIN for v in values)
        for index, value in enumerate(values):
            hidden = admin_load and value.source == REPORT
            value.effective = not hidden and (relop not in ("==", "!=") or index == 0)
    session.flush()


def _creation_builtins(
    session: Session, target: Target, table: ComplexTable, ids: Mapping[str, int]
) -> dict[int, dict[str, object]]:
    """The built-in rows a queue instance is created with (``slots`` stays on
    ``queue_instances``), by attribute id."""
    qi = session.get(QueueInstance, target.queue_instance_id)
    assert qi is not None
    values = queue_builtins(
        f"{qi.queue.name}@{qi.worker.name}", slots=qi.slots, seq_no=qi.queue.seq_no
    )
    return {
        ids[name]: _row(table[name], ids[name], target, "builtin", text)
        for name, text in values.items()
        if name != "slots" and name in ids
    }


def write_queue_builtins(session: Session, worker: Worker) -> None:
    """Give every queue instance of the worker that lacks them its built-in attributes:
    ``qname``, ``hostname``, ``seq_no`` and the rest as Grid Engine creates them."""
    have = set(
        session.scalars(
            select(AttributeValue.queue_instance_id).where(
                AttributeValue.worker_id == worker.id,
                AttributeValue.level == "queue_instance",
                AttributeValue.kind == "builtin",
            )
        )
    )
    table = load_table(session)
    ids = {name: id_ for id_, name in session.execute(select(Attribute.id, Attribute.name))}
    rows: list[dict[str, object]] = []
    for qi in worker.queue_instances:
        if qi.id in have:
            continue
        target = Target("queue_instance", worker.id, qi.id)
        rows.extend(_creation_builtins(session, target, table, ids).values())
    if rows:
        # A new queue instance has no other values yet, so every built-in row counts.
        session.add_all(AttributeValue(**row) for row in rows)
        session.flush()


#: The field of the values API that shows a row of each kind and source.
FIELDS = {
    ("fixed", ADMIN): "complex_values",
    ("builtin", ADMIN): "attributes",
    ("load", ADMIN): "load_values",
    ("load", REPORT): "reported_load_values",
}


def read_values(session: Session, target: Target) -> Values:
    """The values at ``target`` (every built-in queue attribute included, not only those an
    admin set), attribute names in order, the worker's reported load values apart from
    the administrator's, and per attribute the fields whose values matching sees."""
    found: dict[str, dict[str, str]] = {field: {} for field in FIELDS.values()}
    seen: dict[str, list[str]] = {}
    for name, kind, source, text, effective in session.execute(
        select(
            Attribute.name,
            AttributeValue.kind,
            AttributeValue.source,
            AttributeValue.text,
            AttributeValue.effective,
        )
        .join(Attribute, Attribute.id == AttributeValue.attribute_id)
        .where(*target.rows_of(AttributeValue))
        .order_by(Attribute.name)
    ):
        found[FIELDS[kind, source]][name] = text
        if effective:
            seen.setdefault(name, []).append(FIELDS[kind, source])
    consumables = {
        name: Consumption(capacity, used)
        for name, capacity, used in session.execute(
            select(Attribute.name, ConsumableUsage.capacity, ConsumableUsage.used)
            .join(Attribute, Attribute.id == ConsumableUsage.attribute_id)
            .where(*target.rows_of(ConsumableUsage))
            .order_by(Attribute.name)
        )
    }
    order = list(FIELDS.values())
    return Values(
        complex_values=found["complex_values"],
        load_values=found["load_values"],
        attributes=found["attributes"],
        consumables=consumables,
        reported_load_values=found["reported_load_values"],
        matching_uses={name: sorted(fields, key=order.index) for name, fields in seen.items()},
    )
