"""Momotor definitions as rows: the normalised (group, value, mode) triples SQL filters on."""

from __future__ import annotations

from collections.abc import Iterator

from app.db.models import TagMode
from app.matching.errors import InvalidFieldError
from app.notations.errors import NotationError
from app.notations.momotor.groups import ResourceGroup
from app.notations.momotor.items import ResourceItem
from app.notations.momotor.resources import Resources


def parse_resources(text: str, *, field: str = "resources") -> Resources:
    """Parse a Momotor definition, or raise InvalidFieldError naming the field."""
    try:
        return Resources.from_string(text)
    except NotationError as error:
        raise InvalidFieldError(field, str(error), error) from error


def mode_of(item: ResourceItem) -> TagMode:
    if item.required:
        return TagMode.REQUIRED
    if item.excluded:
        return TagMode.EXCLUDED
    return TagMode.OPTIONAL


def tag_rows(resources: Resources) -> Iterator[tuple[str, str, TagMode]]:
    """Every tag as (group, value, mode); typed value groups are not tags and are skipped."""
    for name in resources.group_names():
        group = resources.get(name)
        if isinstance(group, ResourceGroup):
            for item in group.items:
                yield name, item.value, mode_of(item)


def canonical_resources(resources: Resources) -> str:
    """A text equal for every definition that matches the same way: groups and tags sorted.

    Matching does not depend on their order once exact duplicates and mixed modes of one
    tag are gone (both are guaranteed by the parser), so sorting loses nothing.
    """
    groups = {}
    for name in sorted(resources.group_names()):
        group = resources.get(name)
        groups[name] = (
            ResourceGroup(sorted(group.items)) if isinstance(group, ResourceGroup) else group
        )
    return Resources(groups).as_str(compact=True)
