"""The heads of a fair-share pull read tier by tier (app/matching/dispatch/pull_heads.py
``_heads_in_tiers``, SQLite's way: no LATERAL to walk the submitters in turn) are the
whole statement's heads, cut at the limit: a conformance test of the walk against the
statement that reads every submitter at once, on generated farms, with the tiers made
small so that every way out is taken (enough heads from the first tier, found by its
own statement, or from the next, standings cut at the rows read, the whole statement
after too many short tiers), and each way out named once. Run on both databases: the
walk is plain SQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.engine import Database
from app.matching import submission
from app.matching.dispatch import pull_heads
from app.matching.dispatch.puller import Puller, lock_puller
from app.matching.ordering.policy import Ordering
from app.matching.ordering.shares import set_group, set_weight
from app.matching.ordering.usage import book
from app.matching.requests import JobSpec
from app.matching.workers import WorkerSpec, upsert_worker
from tests.support.statements import statements_sent
from tests.support.table_digest import empty_tables
from tests.support.thoroughness import examples

HALFLIFE = 3600.0
SUBMITTERS = tuple(f"s{index}" for index in range(7))
POLICIES = st.sampled_from(
    ["fair-share,priority,age", "group-share,fair-share,priority,age", "fair-share,age"]
)


def _worker_w(session: Session, limit: int) -> tuple[Puller, dict[str, Any]]:
    """Worker ``w``, locked as a pull locks it, and the heads statement's parameters."""
    puller = lock_puller(session, "w", utcnow())
    assert puller is not None
    parameters: dict[str, Any] = {
        "p_worker_id": puller.id,
        "p_generation": puller.generation,
        "p_max_free": puller.max_free,
        "p_limit": limit,
    }
    return puller, parameters


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    text=POLICIES,
    usage=st.lists(st.sampled_from([0.0, 0.0, 50.0, 100.0, 400.0]), min_size=7, max_size=7),
    weights=st.lists(st.sampled_from([1.0, 1.0, 2.0]), min_size=7, max_size=7),
    groups=st.lists(st.sampled_from([None, "g1", "g2"]), min_size=7, max_size=7),
    wanted=st.lists(
        st.tuples(st.sampled_from(SUBMITTERS), st.sampled_from(["11", "12"]), st.integers(0, 2)),
        min_size=1,
        max_size=14,
    ),
    tier_rows=st.integers(1, 8),
    max_tiers=st.integers(1, 3),
    limit=st.integers(1, 5),
)
def test_the_tiers_give_the_whole_statements_heads(
    database: Database,
    use_ordering: Callable[..., Ordering],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    usage: list[float],
    weights: list[float],
    groups: list[str | None],
    wanted: list[tuple[str, str, int]],
    tier_rows: int,
    max_tiers: int,
    limit: int,
) -> None:
    empty_tables(database)
    ordering = use_ordering(text, HALFLIFE)
    monkeypatch.setattr(pull_heads, "TIER_ROWS", tier_rows)
    monkeypatch.setattr(pull_heads, "MAX_TIERS", max_tiers)
    now = utcnow()
    with database.transaction() as session:
        upsert_worker(session, WorkerSpec(name="w", resources="java: ?11, ?12, ?17", slots=30))
        for index, (submitter, tag, priority) in enumerate(wanted):
            job = submission.submit_job(
                session, JobSpec(resources=f"java: {tag}", priority=priority), submitter=submitter
            )
            job.submitted_at = now - timedelta(seconds=index % 3)
    with database.transaction() as session:
        for name, used, weight, group in zip(SUBMITTERS, usage, weights, groups, strict=True):
            if weight != 1.0:
                set_weight(session, name, weight)
            if used:
                book(session, name, used, now, HALFLIFE)
            if group is not None:
                set_group(session, name, group, HALFLIFE)
    with database.transaction() as session:
        puller, parameters = _worker_w(session, limit)
        whole = pull_heads.heads_statement(False, puller.managed, False, ordering=ordering)
        expected = [row[0] for row in session.execute(whole, parameters).all()][:limit]
        with statements_sent(database.engine) as sent:
            tiered = list(
                pull_heads._heads_in_tiers(session, puller.managed, ordering, parameters, limit)
            )
        assert [row[0] for row in tiered] == expected
    # The first tier's statement, then (when it gave fewer than the limit) the standings,
    # the next tiers (``submitter IN`` a bound list) and perhaps the whole statement.
    read_whole = any("submitter_shares.submitter IN" not in text for text in sent[2:])
    event(f"{len(sent)} statements; whole statement: {read_whole}")


@pytest.mark.parametrize(
    ("limit", "max_tiers", "statements", "heads"),
    [
        # The first tier (s0, no usage) has the limit's heads: its statement alone.
        (1, 4, 1, ["s0 11"]),
        # Short of it: the standings, then s1's tier fills the limit.
        (2, 4, 3, ["s0 11", "s1 11"]),
        # Every tier read and still short: no more statements.
        (5, 4, 3, ["s0 11", "s1 11", "s1 12"]),
        # Too many short tiers (one here): the whole statement, its heads not given yet.
        (5, 1, 3, ["s0 11", "s1 11", "s1 12"]),
    ],
)
def test_each_way_out_of_the_walk(
    database: Database,
    use_ordering: Callable[..., Ordering],
    monkeypatch: pytest.MonkeyPatch,
    limit: int,
    max_tiers: int,
    statements: int,
    heads: list[str],
) -> None:
    """The walk's ways out, each named: the statements it sends and the heads it gives,
    in order (s0 has no usage, s1 some; s1's heads are of two categories)."""
    ordering = use_ordering("fair-share,priority,age", HALFLIFE)
    monkeypatch.setattr(pull_heads, "MAX_TIERS", max_tiers)
    names: dict[int, str] = {}
    with database.transaction() as session:
        upsert_worker(session, WorkerSpec(name="w", resources="java: ?11, ?12", slots=4))
        for submitter, tag in (("s0", "11"), ("s1", "11"), ("s1", "12")):
            spec = JobSpec(resources=f"java: {tag}")
            job = submission.submit_job(session, spec, submitter=submitter)
            names[job.id] = f"{submitter} {tag}"
    with database.transaction() as session:
        book(session, "s1", 100.0, utcnow(), HALFLIFE)
    with database.transaction() as session:
        puller, parameters = _worker_w(session, limit)
        with statements_sent(database.engine) as sent:
            walked = list(
                pull_heads._heads_in_tiers(session, puller.managed, ordering, parameters, limit)
            )
    assert [names[row[0]] for row in walked] == heads
    assert len(sent) == statements
    # After the first tier and the standings, the tiers name their submitters (IN) and
    # the whole statement does not.
    read_whole = len(sent) > 2 and "submitter_shares.submitter IN" not in sent[-1]
    assert read_whole == (max_tiers == 1)
