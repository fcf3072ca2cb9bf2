"""The shape of a family's misfit clauses, shared by every family and by the misfit CASE.

app/matching/misfits.py builds one CASE from an ordered list of providers
(``MISFIT_ORDER``), as Prefect's orchestration policies list their rules: each family's
``sql.py`` (and :mod:`app.matching.slots` for queue-instance room) contributes its
reason codes, their meaning, and the conditions that rule a (category, worker) pair out.
Adding a family means adding one provider to that list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import BindParameter, ColumnElement, Integer, bindparam

from app.db.models import Category, Worker

#: The bound parameter holding the id of the one category or the one worker a misfit
#: statement is about (app/matching/gridengine/sql.py ``Scope``); named when Grid Engine's
#: clauses were the only scoped ones.
SCOPE_PARAM = "sge_scope_id"


def scope_id() -> BindParameter[int]:
    """The scope's category or worker id, bound at execution: a clause that narrows its
    sets to the scope is built once per scope kind and serves every statement."""
    return bindparam(SCOPE_PARAM, type_=Integer)


#: One WHEN of the misfit CASE: the condition that rules the pair out, and its reason code.
ReasonClause = tuple[ColumnElement[bool], str]


@dataclass(frozen=True)
class MisfitPair:
    """What a provider's clauses are about: the category and worker entities of the
    statement (the models or aliases of them), the scope kind (``category`` or
    ``worker``, see app/matching/gridengine/sql.py ``Scope``), and the compiled RFC 31
    constraint and task requirements of the categories in question (None: none)."""

    category: type[Category]
    worker: type[Worker]
    scope_kind: str
    constraint_ok: ColumnElement[bool] | None = None
    requirements_ok: ColumnElement[bool] | None = None


@dataclass(frozen=True)
class MisfitClauses:
    """One family's part of the misfit CASE: its reason codes with what they mean (in
    CASE order), and the function that builds its conditions for a pair."""

    reasons: Mapping[str, str]
    clauses: Callable[[MisfitPair], Sequence[ReasonClause]]
