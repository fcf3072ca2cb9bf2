"""Compiled requirements (SQL) against the Python evaluator, on random metadata, on both
databases: the SQL must keep exactly the workers ``evaluate`` accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from app.db.engine import Database
from app.db.models import Worker
from app.matching import workers
from app.matching.debusine import metadata as worker_metadata
from app.matching.debusine.sql import compile_requirement
from app.matching.locks import worker_by_name
from app.matching.workers import WorkerSpec
from app.notations.debusine.metadata import effective, evaluate, parse_requirement
from tests.support.thoroughness import examples

KEYS = ["ns:a", "ns:b", "ns:c", "other:d"]
SCALARS = st.sampled_from(["x", "y", "", 0, 1, 1.0, 2.5, -3, True, False])
VALUES = st.one_of(
    SCALARS, st.none(), st.lists(st.one_of(SCALARS, st.none()), max_size=3), st.just({"k": 1})
)


def _flat(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    report: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        namespace, name = key.split(":")
        report.setdefault(namespace, {})[name] = value
    return report


WORKER = st.tuples(
    st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),  # dynamic
    st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=2),  # static
)

KEY = st.sampled_from([*KEYS, "ns:version", "missing:key"])
LEAF = st.one_of(
    st.builds(lambda k: {"exists": k}, KEY),
    st.builds(lambda op, k, v: {op: [k, v]}, st.sampled_from(["eq", "ne"]), KEY, SCALARS),
    st.builds(
        lambda op, k, v: {op: [k, v]},
        st.sampled_from(["lt", "le", "gt", "ge"]),
        KEY,
        st.sampled_from([0, 1, 1.5, -3]),
    ),
    st.builds(lambda k, vs: {"in": [k, vs]}, KEY, st.lists(SCALARS, max_size=3)),
    st.builds(lambda k, v: {"contains": [k, v]}, KEY, SCALARS),
)
REQUIREMENT = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.builds(lambda ts: {"and": ts}, st.lists(inner, max_size=3)),
        st.builds(lambda ts: {"or": ts}, st.lists(inner, max_size=3)),
        st.builds(lambda t: {"not": t}, inner),
    ),
    max_leaves=6,
)


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fleet=st.lists(WORKER, min_size=1, max_size=5),
    requirements=st.lists(REQUIREMENT, min_size=1, max_size=8),
)
def test_sql_agrees_with_python(
    database: Database,
    fleet: list[tuple[dict[str, Any], dict[str, Any]]],
    requirements: list[Any],
) -> None:
    expected_metadata: dict[str, dict[str, Any]] = {}
    with database.transaction() as session:
        session.execute(delete(Worker))
    for index, (dynamic, static) in enumerate(fleet):
        name = f"w{index}"
        with database.transaction() as session:
            workers.upsert_worker(session, WorkerSpec(name=name))
            worker_metadata.report_dynamic_metadata(session, name, _flat(dynamic))
            worker_metadata.set_static_metadata(session, name, static)
            view = worker_metadata.read_metadata(session, worker_by_name(session, name))
        expected_metadata[name] = view.effective
        flat_dynamic = {**{f"{k.split(':')[0]}:version": 1 for k in dynamic}, **dynamic}
        assert view.effective == effective(static, flat_dynamic)
    with database.transaction() as session:
        for source in requirements:
            tree = parse_requirement(source)
            kept = set(
                session.scalars(select(Worker.name).where(compile_requirement(tree, Worker)))
            )
            wanted = {name for name, meta in expected_metadata.items() if evaluate(tree, meta)}
            assert kept == wanted, source
