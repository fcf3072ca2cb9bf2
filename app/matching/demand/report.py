"""``GET /v1/demand``: the waiting work by category, why each waits, what it would take,
and with worker templates what new workers would start it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from app.matching.allocation.allocator import Policy
from app.matching.category_fit import category_request
from app.matching.demand.answers import Verdict, judge
from app.matching.demand.mix import Mix, Wanted, alone, suggest
from app.matching.demand.need import category_need, job_consumables, node_needs
from app.matching.demand.simulate import simulate
from app.matching.demand.templates import (
    WAITING_FOR,
    Template,
    fitting_categories,
    list_templates,
)
from app.matching.demand.waiting import WaitingCategory, waiting_categories
from app.matching.dispatch.plain_starts import starts_now
from app.matching.gridengine.table import load_table
from app.wire.demand import ANSWERS, CAPACITY, NEVER, CategoryDemand, Suggestion


@dataclass(frozen=True)
class Demand:
    """The answer: one page of categories (by id), how many categories wait in all, the
    waiting jobs and the categories per answer, and the templates' part when asked."""

    categories: list[CategoryDemand]
    total: int
    jobs: dict[str, int]
    category_counts: dict[str, int]
    suggestion: Suggestion | None


def _age(oldest: datetime, now: datetime) -> float:
    return max((now - oldest).total_seconds(), 0.0)


def _suggestion(
    session: Session,
    templates: list[Template],
    judged: list[tuple[WaitingCategory, Verdict]],
    policy: Policy,
) -> tuple[Suggestion, Mix]:
    """Simulate each template against the categories today's workers cannot start now
    (never, capacity) and pack their jobs onto its new workers."""
    targets = [wc for wc, verdict in judged if verdict.answer in (NEVER, CAPACITY)]
    wanted = [Wanted(wc.category.id, wc.waiting, wc.nodes) for wc in targets]
    simulations = [simulate(session, template, targets, policy) for template in templates]
    mix = suggest(simulations, wanted)
    costs = {t.name: t.cost for t in templates}
    suggestion = Suggestion(
        templates=alone(simulations, wanted),
        mix=mix.items,
        cost=sum(item.workers * costs[item.template] for item in mix.items),
        workers=mix.workers,
        starts=sum(mix.starts.values()),
        unrunnable=mix.unrunnable,
    )
    return suggestion, mix


def demand(
    session: Session,
    policy: Policy,
    now: datetime,
    *,
    templates: list[Template] | None,
    limit: int,
    offset: int,
) -> Demand:
    """The demand of every category with waiting jobs (each judged once), its page, and
    with ``templates`` (None: none asked) the simulation of new workers of each."""
    waiting = waiting_categories(session)
    starts = starts_now(session, [wc.first_job for wc in waiting if wc.any_fit and wc.nodes <= 1])
    page_ids = {wc.category.id for wc in waiting[offset : offset + limit]}
    judged = [
        (
            wc,
            judge(
                session,
                wc,
                policy,
                starts.get(wc.first_job),
                words=wc.category.id in page_ids,
            ),
        )
        for wc in waiting
    ]
    template_of: dict[int, str] = {}
    suggestion = None
    if templates:
        suggestion, mix = _suggestion(session, templates, judged, policy)
        template_of = dict(mix.chosen)
    page = judged[offset : offset + limit]
    never = [
        wc.category.id
        for wc, verdict in page
        if verdict.answer == NEVER and wc.category.id not in template_of
    ]
    if never:
        # A job that waits for a template's worker says which (as its explanation does):
        # asked for the page only, as each template's worker is registered to know.
        every = list_templates(session)
        if every:
            for category_id, name in fitting_categories(session, every, never).items():
                template_of.setdefault(category_id, name)
    needs = node_needs(session, [wc.category.id for wc, _ in page])
    # The attribute table only for a page with Grid Engine requests.
    table = load_table(session) if any(wc.category.hard != "NONE" for wc, _ in page) else None
    categories = []
    for wc, verdict in page:
        category_id = wc.category.id
        reasons = list(verdict.reasons)
        template = template_of.get(category_id)
        if verdict.answer == NEVER and template is not None:
            reasons.append(WAITING_FOR.format(template))
        categories.append(
            CategoryDemand(
                category_id=category_id,
                waiting=wc.waiting,
                oldest_age=_age(wc.oldest, now),
                request=category_request(wc.category, wc.task),
                answer=verdict.answer,
                reasons=reasons,
                need=category_need(
                    wc.category,
                    wc.waiting,
                    wc.nodes,
                    needs.get(category_id, {}),
                    job_consumables(wc.category, table) if table is not None else None,
                ),
                template=template,
            )
        )
    jobs = dict.fromkeys(ANSWERS, 0)
    counts = dict.fromkeys(ANSWERS, 0)
    for wc, verdict in judged:
        jobs[verdict.answer] += wc.waiting
        counts[verdict.answer] += 1
    return Demand(categories, len(judged), jobs, counts, suggestion)


__all__ = ["Demand", "demand"]
