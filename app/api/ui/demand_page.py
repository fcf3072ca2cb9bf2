"""The console's Demand page (issue 40): what ``GET /v1/demand`` answers, as a page. The
answer is the route's own (:func:`app.api.routes.demand.demand_for`, the same service and
paging as the API); this module adds what a page needs beside it: each category's request
in one line, the registered templates with their worker bodies, and the links between
pages that keep the templates asked for."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from sqlalchemy.orm import Session

from app.api.routes.demand import EVERY_TEMPLATE, demand_for, template_names
from app.api.schemas.demand import DemandOut, TemplateDemandOut
from app.matching import console
from app.matching.demand import templates as template_store
from app.wire.demand import ANSWERS

#: Templates the page lists (an administrator's short table; the simulation covers every
#: one asked for, listed or not).
SHOWN_TEMPLATES = 100

#: What the page tells of each answer, beside its total.
ANSWER_WORDS = {
    "never": "no registered worker, or set of workers, could ever run them",
    "capacity": "fitting workers exist but are busy or not taking work",
    "policy": "a quota, a limit or a rule of the pull holds them",
    "ready": "a pull or an allocation now would start them",
}


@dataclass(frozen=True)
class TemplateRow:
    """A registered template as the page lists it: its worker body in one line."""

    name: str
    worker: str
    slots: int
    cost: float
    max_count: int | None


@dataclass(frozen=True)
class DemandPage:
    """Everything the Demand page shows."""

    answer: DemandOut
    #: The templates simulated: None when none was (``templates=`` empty, or none is
    #: registered), ``*`` for every registered one, else the names given.
    asked: str | None
    #: Each category of the page's request, in one line in its notations (by id).
    requests: dict[int, str]
    templates: list[TemplateRow]

    @property
    def totals(self) -> list[tuple[str, int, int, str]]:
        """(answer, waiting jobs, categories, what it means), in the API's order."""
        return [
            (a, self.answer.jobs.get(a, 0), self.answer.category_counts.get(a, 0), ANSWER_WORDS[a])
            for a in ANSWERS
        ]

    @property
    def alone(self) -> dict[str, TemplateDemandOut]:
        """What each simulated template would start alone, by name (empty: none was)."""
        suggestion = self.answer.suggestion
        return {t.template: t for t in suggestion.templates} if suggestion is not None else {}

    @property
    def first(self) -> int:
        """The position (from 1) of the page's first category."""
        return self.answer.offset + 1

    @property
    def last(self) -> int:
        return self.answer.offset + len(self.answer.items)

    def link(self, *, offset: int | None = None, templates: str | None = "") -> str:
        """This page's address with another ``offset`` (or the same) and other
        ``templates`` (``""``: the same ones; None: no simulation)."""
        chosen = self.asked if templates == "" else templates
        query = {
            "templates": chosen if chosen is not None else "",
            "limit": str(self.answer.limit),
            "offset": str(self.answer.offset if offset is None else offset),
        }
        return f"/ui/demand?{urlencode(query)}"

    @property
    def previous_offset(self) -> int | None:
        if self.answer.offset == 0:
            return None
        return max(self.answer.offset - self.answer.limit, 0)


def _worker_text(body: dict[str, Any]) -> str:
    """A template's worker body in one line, each part in its notation."""
    parts = []
    if body.get("resources"):
        parts.append(f"resources {body['resources']}")
    inventory = body.get("inventory")
    if inventory is not None:
        shown = inventory if isinstance(inventory, str) else json.dumps(inventory)
        parts.append(f"inventory {shown}")
    if body.get("properties"):
        parts.append("properties " + ",".join(map(str, body["properties"])))
    if body.get("queues"):
        parts.append(f"queues {json.dumps(body['queues'])}")
    if body.get("state", "active") != "active":
        parts.append(f"state {body['state']}")
    return " · ".join(parts) or "(any worker: no tags)"


def _asked(session: Session, text: str | None) -> str | None:
    """The ``templates`` of the page: absent means every registered template (the page
    answers the autoscaler's question by default), empty means none."""
    if text is None:
        return EVERY_TEMPLATE if template_store.any_template(session) else None
    return text.strip() or None


def demand_page(
    session: Session, request: Request, templates: str | None, *, limit: int, offset: int
) -> DemandPage:
    """The page's answer: ``GET /v1/demand`` with the same ``templates``, ``limit`` and
    ``offset`` (an invalid or unknown template name raises its InvalidFieldError)."""
    asked = _asked(session, templates)
    answer = demand_for(
        session, request, templates=template_names(asked), limit=limit, offset=offset
    )
    ids = [item.category_id for item in answer.items]
    if answer.suggestion is not None:
        ids += [u.category_id for u in answer.suggestion.unrunnable]
    rows = [
        TemplateRow(t.name, _worker_text(t.body), int(t.body.get("slots", 1)), t.cost, t.max_count)
        for t in template_store.list_templates(session, limit=SHOWN_TEMPLATES)
    ]
    return DemandPage(
        answer=answer,
        asked=asked,
        requests=console.category_requests(session, sorted(set(ids))),
        templates=rows,
    )
