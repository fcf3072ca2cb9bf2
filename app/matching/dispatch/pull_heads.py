"""The heads query of a pull: the best waiting jobs of the categories the worker fits.

It is built once per variant with bind parameters (building it anew for every pull cost
more Python time than PostgreSQL spent running it). It depends on the database (LATERAL
with several heads per category on PostgreSQL, one head per category on SQLite), on
whether the worker has an inventory, and on whether a plug-in refused some tasks; the first
two give four variants, built on first use; the rare third case is built per pull.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    literal_column,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.orm import Session

from app.db import dialect
from app.db.models import Category, CategoryTask, Job, SubmitterGroup, SubmitterShare
from app.matching.allocation import coarse_filter
from app.matching.dispatch.puller import Puller
from app.matching.dispatch.task_limits import limited_array, not_held_back
from app.matching.gridengine.queue_lists import names_no_queues
from app.matching.misfits import worker_fits
from app.matching.ordering.policy import (
    DEFAULT,
    GROUP_OF_SUBMITTER,
    Ordering,
    active,
    group_key,
    order_terms,
    share_key,
)
from app.matching.slots import WAITING
from app.wire.ordering import GROUP_SHARE

# ``state = 'waiting'`` (WAITING) is written as a literal, not a bound parameter: the
# partial indexes on waiting jobs (``ix_jobs_waiting_order``) are usable only when the
# planner can prove their predicate, which a generic plan of a prepared statement (psycopg
# prepares a statement on its fifth use on a connection) cannot do for ``state = $n``;
# forced generic, the heads query took 25 ms instead of 3.


@dataclass(frozen=True)
class PullerTerms:
    """How the heads query names the pulling worker: bound parameters (:data:`BOUND`) as a
    rule, or expressions over a row the statement reads itself (the take by name,
    app/matching/dispatch/pull_plain.py)."""

    id: Any
    generation: Any
    max_free: Any


#: The pulling worker as bound parameters, as most statements of a pull name it.
BOUND = PullerTerms(bindparam("p_worker_id"), bindparam("p_generation"), bindparam("p_max_free"))
_LIMIT: Any = bindparam("p_limit")
#: How many heads one pull considers before giving up on a round (others may hold them).
HEADS_PER_ROUND = 8
#: LIMIT 1 in the text, not a bound parameter: a generic plan guesses a tenth of the rows
#: for LIMIT $n (4,000 of 40,000 waiting jobs per category), which made every generic
#: plan of the heads look dearer than a custom one.
_ONE: Any = literal_column("1")
_REFUSED: Any = bindparam("p_refused", expanding=True)


class Tier(Enum):
    """Which submitters a fair-share heads statement reads, as the tiered walk of
    :func:`_heads_in_tiers` asks."""

    #: Every submitter with a share row.
    EVERY = "every"
    #: Those bound as ``p_tier``.
    BOUND = "bound"
    #: The first tier: the best leading standings, found by the statement itself.
    FIRST = "first"


def heads_statement(
    skip_locked: bool,
    managed: bool,
    refusals: bool,
    limit: Any = _LIMIT,
    puller: PullerTerms = BOUND,
    ordering: Ordering = DEFAULT,
    tier: Tier = Tier.EVERY,
) -> Select[Any]:
    """The heads query (see :func:`heads`); ``limit`` may be written into the text, as
    the one-statement take of app/matching/dispatch/pull_plain.py does. Under a policy
    with fair share (or group share) the heads are per category and submitter, and the
    rows carry the submitter's standing (``share_key``) and its group's (``group_key``)
    after the four columns; ``tier`` says which submitters' heads are read (see
    :func:`_heads_in_tiers`)."""
    fit, plain = head_fit(managed, refusals, puller), plain_category(managed)
    if ordering.fair_share:
        if skip_locked and ordering.leading_share_rules:
            return _heads_by_submitters_in_turn(fit, plain, limit, ordering)
        return _heads_by_category_and_submitter(fit, plain, limit, ordering, tier)
    if skip_locked:
        return _heads_by_best_categories(fit, plain, limit, ordering.rules)
    return _one_head_per_category(fit, plain, limit, ordering.rules)


def _job_order(rules: tuple[str, ...]) -> tuple[Any, ...]:
    """ORDER BY terms of jobs under rules without fair share."""
    return tuple(order_terms(rules, Job.priority, Job.submitted_at, Job.id))


def head_fit(
    managed: bool,
    refusals: bool,
    puller: PullerTerms,
    fit_test: Callable[[type[Category], Any, Any], ColumnElement[bool]] = worker_fits,
) -> list[ColumnElement[bool]]:
    """What a category must meet for the worker to take its jobs. ``fit_test`` writes the
    misfit cache's verdict: :func:`worker_fits` reads one worker's cache rows once, for a
    pull over many categories; app/matching/dispatch/plain_starts.py, over many workers,
    looks up each pair instead (``pair_fits``)."""
    fit: list[ColumnElement[bool]] = [
        fit_test(Category, puller.id, puller.generation),
        Category.slots <= puller.max_free,
    ]
    if managed:
        fit.append(
            or_(
                Category.jobspec.is_(None),
                and_(
                    coarse_filter.single_node(Category.id),
                    coarse_filter.has_room(Category.id, puller.id),
                ),
            )
        )
    else:
        # One worker is one node: a job asking for N > 1 nodes (RFC 14) is never the pull
        # of one worker, with or without an inventory (issue 22); it waits for an
        # allocation on N distinct workers (app/matching/allocation/allocate.py).
        fit.append(or_(Category.jobspec.is_(None), coarse_filter.single_node(Category.id)))
    if refusals:
        fit.append(or_(CategoryTask.task_id.is_(None), CategoryTask.task_id.not_in(_REFUSED)))
    return fit


def plain_category(managed: bool) -> ColumnElement[bool]:
    """Whether a category's jobs need neither Grid Engine evaluation nor (on a worker
    with an inventory) an allocation."""
    plain = and_(Category.hard == "NONE", Category.pe.is_(None), names_no_queues())
    if managed:
        plain = and_(plain, Category.jobspec.is_(None))
    return plain


def _heads_by_best_categories(
    fit: list[ColumnElement[bool]],
    plain: ColumnElement[bool],
    limit: Any,
    rules: tuple[str, ...],
) -> Select[Any]:
    """PostgreSQL: the best categories by their head job first (one index seek each),
    then several jobs of each of those, so that a pull that finds the best head locked by
    a concurrent pull takes the next job of the same category. The overall best ``limit``
    jobs all lie in the best ``limit`` categories: each of their categories has a head at
    least as good as they are."""
    best_first = _job_order(rules)
    first = (
        select(Job.id, Job.priority, Job.submitted_at)
        .where(Job.category_id == Category.id, Job.state == WAITING, not_held_back())
        .order_by(*best_first)
        .limit(_ONE)
        .lateral("first")
    )
    best = (
        select(Category.id.label("category_id"), CategoryTask.task_id, plain.label("plain"))
        .select_from(Category)
        .join(first, true())
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .where(*fit)
        .order_by(*order_terms(rules, first.c.priority, first.c.submitted_at, first.c.id))
        .limit(limit)
        .subquery("best")
    )
    head = (
        select(Job.id, Job.priority, Job.submitted_at, Job.array_id)
        .where(Job.category_id == best.c.category_id, Job.state == WAITING, not_held_back())
        .order_by(*best_first)
        .limit(limit)
        .lateral("head")
    )
    limited = limited_array(head.c.array_id)
    return (
        select(
            head.c.id,
            best.c.task_id,
            and_(best.c.plain, limited.is_(None)).label("plain"),
            limited.label("limited_array"),
        )
        .select_from(best)
        .join(head, true())
        .order_by(*order_terms(rules, head.c.priority, head.c.submitted_at, head.c.id))
        .limit(limit)
    )


def _one_head_per_category(
    fit: list[ColumnElement[bool]],
    plain: ColumnElement[bool],
    limit: Any,
    rules: tuple[str, ...],
) -> Select[Any]:
    """SQLite (no LATERAL): the head job of each category the worker fits, best first."""
    best_first = _job_order(rules)
    head_id = (
        select(Job.id)
        .where(Job.category_id == Category.id, Job.state == WAITING, not_held_back())
        .order_by(*best_first)
        .limit(1)
        .scalar_subquery()
    )
    heads = (
        select(head_id.label("job_id"), CategoryTask.task_id, plain.label("plain"))
        .select_from(Category)
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .where(*fit)
        .subquery()
    )
    return _jobs_of_heads(heads, best_first, limit)


def _jobs_of_heads(heads: Any, order: Any, limit: Any, *more: Any) -> Select[Any]:
    """(job id, task id, plain, limited array, ``more``...) of the head jobs that
    ``heads`` names (its ``job_id``, ``task_id`` and ``plain``), in ``order``."""
    limited = limited_array(Job.array_id)
    return (
        select(
            Job.id,
            heads.c.task_id,
            and_(heads.c.plain, limited.is_(None)).label("plain"),
            limited.label("limited_array"),
            *more,
        )
        .join(heads, Job.id == heads.c.job_id)
        .order_by(*order)
        .limit(limit)
    )


#: Submitters a fair-share pull may look through (see _heads_by_submitters_in_turn): the
#: LIMIT keeps the ordered subquery a subquery, whose order the plan then keeps.
_MAX_SUBMITTERS: Any = literal_column("1000000")


def _heads_by_submitters_in_turn(
    fit: list[ColumnElement[bool]], plain: ColumnElement[bool], limit: Any, ordering: Ordering
) -> Select[Any]:
    """PostgreSQL, fair share first: the submitters in the order of their standing, and
    for each the best jobs of the categories the worker fits (one seek per category in
    ``ix_jobs_waiting_submitter_order``), best first. The submitters come in order and
    the answer is sorted by standing first, so the plan stops (LIMIT over an incremental
    sort) once the submitters of the first standings gave ``limit`` heads: a pull costs
    O(categories) per submitter it looks at, usually one, not O(categories x
    submitters). Submitters of equal standing (no usage yet) are all read: among them
    priority, then age decide. With ``group-share`` first the submitters come in the
    order of their group's standing (then their own, with ``fair-share`` next), the
    same walk."""
    within = ordering.within_submitter
    shares = _standings(ordering)
    leading = [
        shares.c.group_key if rule == GROUP_SHARE else shares.c.share_key
        for rule in ordering.leading_share_rules
    ]
    shares = select(shares).order_by(*leading).limit(_MAX_SUBMITTERS).subquery("s")
    first = (
        select(Job.id, Job.priority, Job.submitted_at, Job.array_id)
        .where(
            Job.category_id == Category.id,
            Job.submitter == shares.c.submitter,
            Job.state == WAITING,
            not_held_back(),
        )
        .order_by(*_job_order(within))
        .limit(_ONE)
        # The submitter is the outer query's, two levels up.
        .correlate_except(Job)
        .lateral("first")
    )
    best = (
        select(
            first.c.id,
            first.c.priority,
            first.c.submitted_at,
            first.c.array_id,
            CategoryTask.task_id,
            plain.label("plain"),
        )
        .select_from(Category)
        .join(first, true())
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .where(*fit)
        .order_by(*order_terms(within, first.c.priority, first.c.submitted_at, first.c.id))
        .limit(limit)
        .lateral("best")
    )
    limited = limited_array(best.c.array_id)
    return (
        select(
            best.c.id,
            best.c.task_id,
            and_(best.c.plain, limited.is_(None)).label("plain"),
            limited.label("limited_array"),
            shares.c.share_key,
            shares.c.group_key,
        )
        .select_from(shares)
        .join(best, true())
        .order_by(
            *order_terms(
                ordering.rules,
                best.c.priority,
                best.c.submitted_at,
                best.c.id,
                shares.c.share_key,
                shares.c.group_key,
            )
        )
        .limit(limit)
    )


def _standings(ordering: Ordering, tier: Tier = Tier.EVERY) -> Any:
    """Each submitter with a share row (of the ``tier``), its standing (``share_key``)
    and its group's (``group_key``; the submitter's own when the policy has no
    ``group-share``, so that a policy without groups reads no group row)."""
    chosen = _standings_select(ordering, tier)
    if tier is Tier.FIRST:
        # OFFSET 0 keeps SQLite from flattening the tier into the pairs, where it tested
        # a submitter's standing after the seek for its head instead of before.
        chosen = chosen.offset(0)
    return chosen.subquery("standing")


def _standings_select(ordering: Ordering, tier: Tier = Tier.EVERY) -> Select[str, float, float]:
    key = share_key(ordering.halflife_seconds)
    group = group_key(ordering.halflife_seconds) if ordering.group_share else key
    chosen = select(SubmitterShare.submitter, key.label("share_key"), group.label("group_key"))
    if ordering.group_share:
        chosen = chosen.outerjoin(SubmitterGroup, GROUP_OF_SUBMITTER)
    if tier is Tier.BOUND:
        chosen = chosen.where(SubmitterShare.submitter.in_(bindparam("p_tier", expanding=True)))
    elif tier is Tier.FIRST:
        # The same expressions on the same rows give the same values, so equality with
        # the best row's keys is exact.
        best = _standings_select(ordering).subquery("best")
        mine = {"share_key": key, "group_key": group}
        columns = [_standing_column(rule) for rule in ordering.leading_share_rules]
        best_keys = select(*(best.c[name] for name in columns))
        best_keys = best_keys.order_by(*(best.c[name] for name in columns)).limit(1)
        chosen = chosen.where(tuple_(*(mine[name] for name in columns)).in_(best_keys))
    return chosen


def _heads_by_category_and_submitter(
    fit: list[ColumnElement[bool]],
    plain: ColumnElement[bool],
    limit: Any,
    ordering: Ordering,
    tier: Tier = Tier.EVERY,
) -> Select[Any]:
    """Fair share (docs/ordering.md): the head job of each category the worker fits and
    each submitter with a share row (every submitter that submitted while fair share was
    on has one), one seek each in ``ix_jobs_waiting_submitter_order``; best first by the
    policy's rules, the submitter's standing (``share_key``) standing for fair share and
    its group's (``group_key``) for group share. The same statement on both databases
    (correlated subqueries, no LATERAL): a pull that finds its best head locked takes
    the next head, of another pair."""
    within = _job_order(ordering.within_submitter)
    standing = _standings(ordering, tier)
    head_id = (
        select(Job.id)
        .where(
            Job.category_id == Category.id,
            Job.submitter == standing.c.submitter,
            Job.state == WAITING,
            not_held_back(),
        )
        .order_by(*within)
        .limit(1)
        .scalar_subquery()
    )
    pairs = (
        select(
            head_id.label("job_id"),
            CategoryTask.task_id,
            plain.label("plain"),
            standing.c.share_key,
            standing.c.group_key,
        )
        .select_from(Category)
        .join(standing, true())
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .where(*fit)
        .subquery("pairs")
    )
    order = order_terms(
        ordering.rules,
        Job.priority,
        Job.submitted_at,
        Job.id,
        pairs.c.share_key,
        pairs.c.group_key,
    )
    return _jobs_of_heads(pairs, order, limit, pairs.c.share_key, pairs.c.group_key)


_cached_heads = lru_cache(maxsize=16)(heads_statement)


@lru_cache(maxsize=2)
def _job_fit_statement(managed: bool) -> Select[int | None, bool, int | None]:
    """The heads query's conditions for one named waiting job (``p_job_id``)."""
    limited = limited_array(Job.array_id)
    return (
        select(
            CategoryTask.task_id,
            and_(plain_category(managed), limited.is_(None)).label("plain"),
            limited.label("limited_array"),
        )
        .select_from(Job)
        .join(Category, Category.id == Job.category_id)
        .outerjoin(CategoryTask, CategoryTask.category_id == Category.id)
        .where(
            Job.id == bindparam("p_job_id"),
            Job.state == WAITING,
            not_held_back(),
            *head_fit(managed, False, BOUND),
        )
    )


def job_fit(
    session: Session, puller: Puller, job_id: int
) -> tuple[int | None, bool, int | None] | None:
    """(task id, plain, limited array) of the waiting job when it and its category meet
    everything the heads query asks for this worker (:func:`heads` would list it, were it
    the best job), None otherwise: how the explanation asks the pull's own question about
    one job (app/matching/readiness.py)."""
    row = session.execute(
        _job_fit_statement(puller.managed),
        {
            "p_job_id": job_id,
            "p_worker_id": puller.id,
            "p_generation": puller.generation,
            "p_max_free": puller.max_free,
        },
    ).one_or_none()
    return None if row is None else (row[0], bool(row[1]), row[2])


def heads(session: Session, puller: Puller, limit: int, refused_tasks: set[int]) -> Iterator[Any]:
    """(job id, task id, plain, limited array) of the best waiting jobs of the categories
    the worker fits, best first, leaving out the tasks whose plug-in already refused the
    worker and the tasks of arrays that run as many tasks as they may (qsub -tc,
    app/matching/dispatch/task_limits.py). ``plain`` says that the category needs neither
    Grid Engine evaluation nor an allocation on this worker, and that the job is no task
    of an array with a limit (``limited array`` names that array). A worker with an
    inventory only gets jobspec jobs that fit on one node and that its free counts could
    hold (the allocation itself is decided after the claim). The heads come as the
    caller takes them: a pull that starts the first sends no statement for the rest
    (see :func:`_heads_in_tiers`)."""
    skip_locked = dialect.supports_skip_locked(session.connection())
    ordering = active()
    parameters: dict[str, Any] = {
        "p_worker_id": puller.id,
        "p_generation": puller.generation,
        "p_max_free": puller.max_free,
        "p_limit": limit,
    }
    if refused_tasks:
        parameters["p_refused"] = sorted(refused_tasks)
    if ordering.fair_share and ordering.leading_share_rules and not skip_locked:
        return _heads_in_tiers(session, puller.managed, ordering, parameters, limit)
    statement = _cached_heads(skip_locked, puller.managed, bool(refused_tasks), ordering=ordering)
    return iter(session.execute(statement, parameters).all())


#: Submitters' standings a tiered pull reads at most, and the tiers it walks before it
#: reads every submitter at once instead (see _heads_in_tiers).
TIER_ROWS = 64
MAX_TIERS = 4


def _heads_in_tiers(
    session: Session, managed: bool, ordering: Ordering, parameters: dict[str, Any], limit: int
) -> Iterator[Any]:
    """The heads under a policy that starts with fair share, where the database has no
    LATERAL to walk the submitters in turn (SQLite): the submitters in the order of
    their leading standings, in tiers of equal standing, and the heads of each tier in
    turn (one seek per category the worker fits and submitter of the tier) until
    ``limit`` came. Every head of a tier comes before every head of the next, so the
    concatenation is the whole statement's answer, cut at ``limit``.

    The first tier's heads come from one statement that finds the tier itself; the
    rest is read only when the caller asks for more (a pull that starts the first head,
    as most do, sends no statement more than without fair share). Then the standings
    (:data:`TIER_ROWS` at most) and the next tiers in turn. After :data:`MAX_TIERS`
    tiers short of ``limit`` (submitters with nothing waiting that the worker fits), or
    when the first :data:`TIER_ROWS` submitters are one tier, the whole statement is
    read once, and its heads not given yet follow. Reading every submitter's head of
    every category cost 17 ms a pull at 100 submitters against 1.7 ms without fair
    share (bench/dispatch.py --fair-share, 100,000 waiting jobs)."""
    refusals = "p_refused" in parameters
    first = _cached_heads(False, managed, refusals, ordering=ordering, tier=Tier.FIRST)
    given = list(session.execute(first, parameters).all()[:limit])
    yield from given
    if len(given) >= limit:
        return
    rows = session.connection().execute(_ranked_submitters(ordering, TIER_ROWS)).all()
    tiers: list[list[str]] = []
    last: tuple[Any, ...] | None = None
    for submitter, *standing in rows:
        if tuple(standing) != last:
            tiers.append([])
            last = tuple(standing)
        tiers[-1].append(submitter)
    every = len(rows) < TIER_ROWS
    if not every:
        tiers.pop()  # the last may have more members beyond the rows read
    if tiers:
        # tiers[0] is complete (a tier follows it, or every row was read), so it is the
        # first tier, whose heads were given.
        bound = _cached_heads(False, managed, refusals, ordering=ordering, tier=Tier.BOUND)
        for tier in tiers[1:MAX_TIERS]:
            more = session.execute(bound, {**parameters, "p_tier": tier}).all()
            more = more[: limit - len(given)]
            given += more
            yield from more
            if len(given) >= limit:
                return
        if every and len(tiers) <= MAX_TIERS:
            return
    whole = _cached_heads(False, managed, refusals, ordering=ordering)
    seen = {row[0] for row in given}
    rest = [row for row in session.execute(whole, parameters).all() if row[0] not in seen]
    yield from rest[: limit - len(given)]


@lru_cache(maxsize=8)
def _ranked_submitters(ordering: Ordering, rows: int) -> Select[Any]:
    """The first ``rows`` submitters by their leading standings, with those standings:
    built once per policy (building it anew cost more than running it)."""
    ranked = _standings_select(ordering).subquery("ranked")
    keys = [ranked.c[_standing_column(rule)] for rule in ordering.leading_share_rules]
    return select(ranked.c.submitter, *keys).order_by(*keys, ranked.c.submitter).limit(rows)


def _standing_column(rule: str) -> str:
    """The column of :func:`_standings` that a leading share rule orders by."""
    return "group_key" if rule == GROUP_SHARE else "share_key"
