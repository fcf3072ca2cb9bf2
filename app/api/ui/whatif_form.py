"""The console's what-if form: the pasted text (YAML, or JSON, which YAML reads too) as
the body of POST /v1/whatif, validated by its schema and answered by its service; every
refusal becomes a line the page shows under the form instead of an error page."""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.api.problems import ProblemError, human_message
from app.api.routes.whatif import answer_for
from app.api.schemas.whatif import WhatIfIn, WhatIfOut
from app.matching.errors import InvalidFieldError
from app.settings import Settings


@dataclass(frozen=True)
class Outcome:
    """The answer, or the problems of the pasted change set (one line each)."""

    answer: WhatIfOut | None
    problems: list[str]


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


def run(session: Session, text: str, settings: Settings, *, by: str) -> Outcome:
    """The what-if of ``text``; nothing is stored either way."""
    try:
        return Outcome(answer_for(session, parse(text), settings, by=by), [])
    except FormProblems as error:
        return Outcome(None, error.problems)
    except (InvalidFieldError, ProblemError) as error:
        return Outcome(None, [str(error)])
