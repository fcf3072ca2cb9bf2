"""A worker's static and dynamic metadata (docs/notations/debusine.md): stored as typed
rows, read back as dicts, and kept consistent with the misfit cache.

Every write replaces the rows of one side and recomputes which dynamic rows the static
side overrides (``effective``). When the effective metadata or a namespace version changes,
the worker's generation grows and its misfit rows are rewritten in the same transaction; a
report that changes nothing but the time only stamps the time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import Worker, WorkerMetadata, WorkerMetadataNamespace
from app.matching import announce, liveness
from app.matching.errors import InvalidFieldError
from app.matching.locks import worker_by_name
from app.matching.misfits import recache_worker_misfits
from app.notations.debusine.metadata import (
    Namespace,
    effective,
    flatten_dynamic,
    parse_dynamic,
    parse_static,
)
from app.notations.errors import NotationError

STATIC = "static"
DYNAMIC = "dynamic"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _typed(value: Any) -> dict[str, Any]:
    """The typed columns of one value: what SQL compares."""
    if isinstance(value, bool):
        return {"value_type": "boolean", "value_bool": value}
    if isinstance(value, (int, float)):
        return {"value_type": "number", "value_number": float(value)}
    if isinstance(value, str):
        return {"value_type": "string", "value_text": value}
    if value is None:
        return {"value_type": "null"}
    return {"value_type": "list" if isinstance(value, list) else "object"}


def metadata_rows(
    worker_id: int, source: str, flat: dict[str, Any], *, shadowed: set[str], at: datetime
) -> list[dict[str, Any]]:
    """Rows of one side's flat metadata: the value, and one row per element of a list."""
    rows: list[dict[str, Any]] = []
    empty = {"value_number": None, "value_text": None, "value_bool": None}
    for key, value in sorted(flat.items()):
        common = {
            "worker_id": worker_id,
            "source": source,
            "key": key,
            "effective": key not in shadowed,
            "reported_at": at,
        }
        rows.append(
            {**common, **empty, "element": None, "value_json": _canonical(value), **_typed(value)}
        )
        if isinstance(value, list):
            rows += [
                {**common, **empty, "element": i, "value_json": _canonical(v), **_typed(v)}
                for i, v in enumerate(value)
            ]
    return rows


@dataclass(frozen=True)
class WorkerMetadataView:
    """A worker's metadata as people and plug-ins see it."""

    static: dict[str, Any]
    dynamic: dict[str, Any]
    versions: dict[str, int]
    namespaces_reported_at: dict[str, datetime]
    reported_at: datetime | None

    @property
    def effective(self) -> dict[str, Any]:
        return effective(self.static, self.dynamic)


def _side(session: Session, worker_id: int, source: str) -> dict[str, Any]:
    rows = session.execute(
        select(WorkerMetadata.key, WorkerMetadata.value_json).where(
            WorkerMetadata.worker_id == worker_id,
            WorkerMetadata.source == source,
            WorkerMetadata.element.is_(None),
        )
    )
    return {key: json.loads(value) for key, value in rows}


def read_metadata(session: Session, worker: Worker) -> WorkerMetadataView:
    namespaces = session.execute(
        select(
            WorkerMetadataNamespace.namespace,
            WorkerMetadataNamespace.version,
            WorkerMetadataNamespace.reported_at,
        ).where(WorkerMetadataNamespace.worker_id == worker.id)
    ).all()
    return WorkerMetadataView(
        static=_side(session, worker.id, STATIC),
        dynamic=_side(session, worker.id, DYNAMIC),
        versions={name: version for name, version, _ in namespaces},
        namespaces_reported_at={name: at for name, _, at in namespaces},
        reported_at=worker.metadata_reported_at,
    )


def effective_metadata(session: Session, worker_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The effective flat metadata of several workers (what ``can_run_on`` plug-ins see)."""
    found: dict[int, dict[str, Any]] = {worker_id: {} for worker_id in worker_ids}
    if not worker_ids:
        return found
    rows = session.execute(
        select(WorkerMetadata.worker_id, WorkerMetadata.key, WorkerMetadata.value_json).where(
            WorkerMetadata.worker_id.in_(worker_ids),
            WorkerMetadata.effective.is_(True),
            WorkerMetadata.element.is_(None),
        )
    )
    for worker_id, key, value in rows:
        found[worker_id][key] = json.loads(value)
    return found


def _store(
    session: Session,
    worker: Worker,
    static: dict[str, Any],
    dynamic: dict[str, Any],
    namespaces: dict[str, Namespace] | None,
    *,
    dynamic_at: datetime | None,
) -> None:
    """Rewrite the worker's rows; bump the generation and recache when matching changes."""
    before = read_metadata(session, worker)
    session.execute(delete(WorkerMetadata).where(WorkerMetadata.worker_id == worker.id))
    now = utcnow()
    static_at = now
    rows = metadata_rows(worker.id, STATIC, static, shadowed=set(), at=static_at)
    rows += metadata_rows(worker.id, DYNAMIC, dynamic, shadowed=set(static), at=dynamic_at or now)
    if rows:
        session.execute(insert(WorkerMetadata), rows)
    versions = before.versions
    if namespaces is not None:
        assert dynamic_at is not None
        session.execute(
            delete(WorkerMetadataNamespace).where(WorkerMetadataNamespace.worker_id == worker.id)
        )
        if namespaces:
            session.execute(
                insert(WorkerMetadataNamespace),
                [
                    {
                        "worker_id": worker.id,
                        "namespace": ns.name,
                        "version": ns.version,
                        "reported_at": dynamic_at,
                    }
                    for ns in namespaces.values()
                ],
            )
        versions = {ns.name: ns.version for ns in namespaces.values()}
        worker.metadata_reported_at = dynamic_at
    if before.effective != effective(static, dynamic) or before.versions != versions:
        worker.generation += 1
        session.flush()
        recache_worker_misfits(session, worker.id)
    announce.workers_changed(session, [worker.id])
    session.flush()


def set_static_metadata(session: Session, worker_name: str, data: object) -> Worker:
    """The administrator replaces the worker's static metadata (as debusine's
    ``worker edit_metadata`` does: the whole object, not a merge)."""
    try:
        static = parse_static(data)
    except NotationError as error:
        raise InvalidFieldError("metadata", str(error), error) from error
    worker = worker_by_name(session, worker_name, lock=True)
    dynamic = _side(session, worker.id, DYNAMIC)
    _store(session, worker, static, dynamic, None, dynamic_at=None)
    return worker


def report_dynamic_metadata(session: Session, worker_name: str, data: object) -> Worker:
    """The worker reports its dynamic metadata: it replaces the previous report whole, and
    the server stamps the time (debusine issue #8)."""
    try:
        namespaces = parse_dynamic(data)
    except NotationError as error:
        raise InvalidFieldError("metadata", str(error), error) from error
    worker = worker_by_name(session, worker_name, lock=True)
    now = utcnow()
    liveness.heard_from(session, worker, now)
    static = _side(session, worker.id, STATIC)
    _store(session, worker, static, flatten_dynamic(namespaces), namespaces, dynamic_at=now)
    return worker


def refresh_due(worker: Worker, max_age_seconds: float, now: datetime | None = None) -> bool:
    """Whether the worker should report its dynamic metadata again: never reported, or
    older than ``max_age_seconds`` (24 h by default, debusine issue #8)."""
    return report_due(worker.metadata_reported_at, max_age_seconds, now)


def report_due(
    reported_at: datetime | None, max_age_seconds: float, now: datetime | None = None
) -> bool:
    """:func:`refresh_due` from the time of the last report alone."""
    if reported_at is None:
        return True
    return (now or utcnow()) - reported_at > timedelta(seconds=max_age_seconds)


def seconds_until_report_due(
    reported_at: datetime | None, max_age_seconds: float, now: datetime | None = None
) -> float:
    """How long until :func:`report_due` turns true (0 when it is already): a long-poll
    pull ends then, so the worker hears that it should report."""
    if reported_at is None:
        return 0.0
    age = ((now or utcnow()) - reported_at).total_seconds()
    return max(0.0, max_age_seconds - age)
