"""The console's what-if form: the pasted text (YAML, or JSON, which YAML reads too) as
the body of POST /v1/whatif, validated by its schema and answered by its service; every
refusal becomes a line the page shows under the form instead of an error page."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.api.problems import ProblemError, human_message
from app.api.routes.whatif import answer_for
from app.api.schemas.whatif import WhatIfIn, WhatIfOut
from app.matching import console
from app.matching.errors import InvalidFieldError
from app.settings import Settings


@dataclass(frozen=True)
class Outcome:
    """The answer, or the problems of the pasted change set (one line each), and what
    each category of the answer requests (by id)."""

    answer: WhatIfOut | None
    problems: list[str]
    requests: dict[int, str] = field(default_factory=dict)
    #: The categories the what-if's own jobs made: rolled back, so no page shows them.
    provisional: frozenset[int] = frozenset()


class FormProblems(Exception):
    """The pasted change set is not a valid body of POST /v1/whatif: not YAML or JSON,
    not a mapping, or fields its schema refuses; ``problems`` says each in one line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def parse(text: str) -> WhatIfIn:
    """The body the text states (empty text: the empty change set)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise FormProblems([f"not YAML or JSON: {' '.join(str(error).split())}"]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FormProblems(["the change set must be a mapping (add_workers, add_jobs, ...)"])
    try:
        return WhatIfIn.model_validate(data)
    except ValidationError as error:
        raise FormProblems(
            [
                ".".join(str(part) for part in e["loc"]) + f": {human_message(e)}"
                for e in error.errors()
            ]
        ) from None


def requests_of(
    session: Session, body: WhatIfIn, answer: WhatIfOut
) -> tuple[dict[int, str], frozenset[int]]:
    """What each category of the answer requests, in its notations: a stored category's
    request, or, for one the what-if's jobs made (rolled back with them), the request of
    the first added job in it, as submitted; and the ids of the latter."""
    ids = [c.category_id for c in answer.categories]
    found = console.category_requests(session, ids)
    provisional = set()
    for added in answer.added_jobs:
        if added.category_id not in found:
            provisional.add(added.category_id)
            summary = console.spec_summary(body.add_jobs[added.index].spec())
            found[added.category_id] = f"{summary} (new: add_jobs #{added.index})"
    return found, frozenset(provisional)


def run(session: Session, text: str, settings: Settings, *, by: str) -> Outcome:
    """The what-if of ``text``; nothing is stored either way."""
    try:
        body = parse(text)
        answer = answer_for(session, body, settings, by=by)
        requests, provisional = requests_of(session, body, answer)
        return Outcome(answer, [], requests, provisional)
    except FormProblems as error:
        return Outcome(None, error.problems)
    except (InvalidFieldError, ProblemError) as error:
        return Outcome(None, [str(error)])
