"""RFC 31 constraints as SQL predicates over workers.

A category's constraint tree is stored as leaf rows (property names, hostlist runs, idset
runs, numbered depth-first); the tree itself compiles to a boolean SQL expression whose
leaves are EXISTS over those rows. A hostlist of 100,000 names is one run row and one
EXISTS, never 100,000 parameters. The semantics are those of
``app.notations.flux.constraints.matches`` (with the hostname also counting as a property, as
in flux-core), and the tests hold the two to the same answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ColumnExpressionArgument,
    and_,
    case,
    exists,
    false,
    insert,
    not_,
    or_,
    true,
)
from sqlalchemy.orm import Session, aliased

from app.db.models import (
    ConstraintHostRun,
    ConstraintProperty,
    ConstraintRankRun,
    Worker,
    WorkerNamePart,
    WorkerProperty,
)
from app.matching.reasons import MisfitClauses, MisfitPair, ReasonClause
from app.notations.flux.constraints import (
    And,
    Constraint,
    Hosts,
    Not,
    Or,
    Properties,
    Ranks,
    leaves,
)
from app.notations.flux.hostlist import name_parts


def store_constraint_rows(session: Session, category_id: int, tree: Constraint) -> None:
    """Write the leaf rows of a category's constraint."""
    properties: list[dict[str, Any]] = []
    hosts: list[dict[str, Any]] = []
    ranks: list[dict[str, Any]] = []
    for number, leaf in enumerate(leaves(tree)):
        base = {"category_id": category_id, "leaf": number}
        if isinstance(leaf, Properties):
            properties += [{**base, "name": n, "negated": False} for n in sorted(leaf.required)]
            properties += [{**base, "name": n, "negated": True} for n in sorted(leaf.forbidden)]
        elif isinstance(leaf, Hosts):
            for hostlist in leaf.hostlists:
                hosts += [
                    {
                        **base,
                        "prefix": run.prefix,
                        "lo": run.lo,
                        "hi": run.hi,
                        "width": run.width,
                        "suffix": run.suffix,
                    }
                    for run in hostlist.runs
                ]
        else:
            ranks += [{**base, "lo": lo, "hi": hi} for lo, hi in leaf.ids.runs]
    for model, rows in (
        (ConstraintProperty, properties),
        (ConstraintHostRun, hosts),
        (ConstraintRankRun, ranks),
    ):
        if rows:
            session.execute(insert(model), rows)


def store_worker_name_parts(session: Session, worker_id: int, name: str) -> None:
    rows = [
        {
            "worker_id": worker_id,
            "prefix": prefix,
            "number": number,
            "digits_len": digits,
            "natural_len": natural,
            "suffix": suffix,
        }
        for prefix, number, digits, natural, suffix in name_parts(name)
    ]
    if rows:
        session.execute(insert(WorkerNamePart), rows)


def _has_property(worker: type[Worker], name: ColumnExpressionArgument[str]) -> ColumnElement[bool]:
    wp = aliased(WorkerProperty)
    owned = exists().where(wp.worker_id == worker.id, wp.name == name).correlate_except(wp)
    # flux-core also matches a property against the hostname
    # (docs/notations/flux.md#rfc-31-constraints).
    return or_(owned, worker.name == name)


def _property_contradicted(
    category_id: ColumnExpressionArgument[int] | int,
    leaf: int,
    worker: type[Worker],
    *,
    negated: bool,
) -> ColumnElement[bool]:
    """A property of the leaf that the worker contradicts: a required one it lacks, or with
    ``negated`` a forbidden one it has."""
    wanted = aliased(ConstraintProperty)
    has = _has_property(worker, wanted.name)
    return (
        exists()
        .where(
            wanted.category_id == category_id,
            wanted.leaf == leaf,
            wanted.negated.is_(negated),
            has if negated else not_(has),
        )
        .correlate_except(wanted)
    )


def _properties(
    category_id: ColumnExpressionArgument[int] | int, leaf: int, worker: type[Worker]
) -> ColumnElement[bool]:
    missing = _property_contradicted(category_id, leaf, worker, negated=False)
    present = _property_contradicted(category_id, leaf, worker, negated=True)
    return and_(not_(missing), not_(present))


def _hosts(
    category_id: ColumnExpressionArgument[int] | int, leaf: int, worker: type[Worker]
) -> ColumnElement[bool]:
    run, part = aliased(ConstraintHostRun), aliased(WorkerNamePart)
    padded_as_written = part.digits_len == case(
        (run.width > part.natural_len, run.width), else_=part.natural_len
    )
    in_range = (
        exists()
        .where(
            part.worker_id == worker.id,
            part.prefix == run.prefix,
            part.suffix == run.suffix,
            part.number >= run.lo,
            part.number <= run.hi,
            padded_as_written,
        )
        .correlate_except(part)
    )
    return (
        exists()
        .where(
            run.category_id == category_id,
            run.leaf == leaf,
            or_(
                and_(run.lo.is_(None), run.prefix == worker.name),
                and_(run.lo.is_not(None), in_range),
            ),
        )
        .correlate_except(run)
    )


def _ranks(
    category_id: ColumnExpressionArgument[int] | int, leaf: int, worker: type[Worker]
) -> ColumnElement[bool]:
    run = aliased(ConstraintRankRun)
    return (
        exists()
        .where(
            run.category_id == category_id,
            run.leaf == leaf,
            worker.rank >= run.lo,
            worker.rank <= run.hi,
        )
        .correlate_except(run)
    )


def compile_constraint(
    tree: Constraint, category_id: ColumnExpressionArgument[int] | int, worker: type[Worker]
) -> ColumnElement[bool]:
    """The tree as a predicate on ``worker``, reading the leaf rows of ``category_id``."""
    numbers: Iterator[int] = iter(range(1 << 30))

    def build(node: Constraint) -> ColumnElement[bool]:
        if isinstance(node, And):
            return and_(true(), *(build(t) for t in node.terms))
        if isinstance(node, Or):
            # RFC 31: an empty "or" is true (Fluxion differs; vectors/flux/constraint.jsonl).
            return or_(*(build(t) for t in node.terms)) if node.terms else true()
        if isinstance(node, Not):
            return not_(build(node.term))
        leaf = next(numbers)
        if isinstance(node, Properties):
            return _properties(category_id, leaf, worker)
        if isinstance(node, Hosts):
            return _hosts(category_id, leaf, worker) if node.hostlists else false()
        assert isinstance(node, Ranks)
        return _ranks(category_id, leaf, worker)

    return build(tree)


REASONS = {"constraint": "the job's RFC 31 constraint does not hold on the worker"}


def _misfit_clauses(pair: MisfitPair) -> tuple[ReasonClause, ...]:
    """The compiled constraint of the categories in question (true: none)."""
    holds = pair.constraint_ok if pair.constraint_ok is not None else true()
    return ((not_(holds), "constraint"),)


MISFITS = MisfitClauses(REASONS, _misfit_clauses)
