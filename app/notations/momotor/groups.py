"""Momotor tag groups: an ordered, duplicate-free set of items, and how two groups match.

A group's value is the minimum of its cells in the match table
(:mod:`app.notations.momotor.items`), none when every cell is ignored. One group never names
one tag in two modes (:class:`~app.notations.momotor.errors.ConflictingModesError`; Momotor's
outcome there depends on item order), which lets a group keep its required, offered and
excluded values as frozensets and decide a match with a few set operations. Groups are
interned by their items (:func:`intern_group`): definitions share groups far more often than
whole strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeAlias

from app.notations.momotor.errors import ConflictingModesError, GroupKindMismatchError
from app.notations.momotor.items import (
    INTERN_LIMIT,
    OPTIONAL,
    REQUIRED,
    ResourceItem,
    intern_tag,
    written_item,
)
from app.notations.momotor.scanner import Located, located_items
from app.notations.momotor.strengths import STRONG, STRONGEST, WEAK, WEAKEST, NoMatch
from app.notations.momotor.typed_groups import ValueGroup

__all__ = ["AnyGroup", "ResourceGroup"]


def conflicting_modes(
    group: str | None, old: ResourceItem, new: ResourceItem
) -> ConflictingModesError:
    """The error for a group naming one tag in two modes (Momotor's outcome depends on order)."""
    where = "this group" if group is None else f"group {group!r}"
    return ConflictingModesError(
        f"{where} names tag {new.value!r} both as {old.as_str()!r} and as {new.as_str()!r}",
        expected=f"one of {old.as_str()!r} or {new.as_str()!r} in {where}",
    )


_NONE: Final[frozenset[str]] = frozenset()


class ResourceGroup:
    """An ordered, duplicate-free tuple of tag items.

    Since a group never names one value in two modes, matching two groups only needs the
    sets of required, offered (required or optional) and excluded values, built once here:
    ``match`` is then a few C-level set operations instead of a walk over the items.
    """

    __slots__ = ("_excluded", "_items", "_offered", "_required")

    _items: tuple[ResourceItem, ...]
    _required: frozenset[str]
    _offered: frozenset[str]
    _excluded: frozenset[str]

    def __init__(self, items: Iterable[ResourceItem] | None = None) -> None:
        index: dict[str, ResourceItem] = {}
        for item in items or ():
            old = index.get(item.value)
            if old is None:
                index[item.value] = item
            elif old != item:
                raise conflicting_modes(None, old, item)
        self._init(tuple(index.values()))

    def _init(self, items: tuple[ResourceItem, ...]) -> None:
        # Called once per distinct group (groups are interned), so it may do the work that
        # makes every later match cheap.
        required: list[str] = []
        optional: list[str] = []
        excluded: list[str] = []
        for value, mode in items:
            if mode == REQUIRED:
                required.append(value)
            elif mode == OPTIONAL:
                optional.append(value)
            else:
                excluded.append(value)
        setter = object.__setattr__
        setter(self, "_items", items)
        if not optional:
            offered = frozenset(required) if required else _NONE
            setter(self, "_required", offered)
        else:
            offered = frozenset(optional + required if required else optional)
            setter(self, "_required", frozenset(required) if required else _NONE)
        setter(self, "_offered", offered)
        setter(self, "_excluded", frozenset(excluded) if excluded else _NONE)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ResourceGroup is immutable")

    @property
    def items(self) -> tuple[ResourceItem, ...]:
        """The items in first-seen order."""
        return self._items

    @classmethod
    def create(cls, value: str | Iterable[str]) -> ResourceGroup:
        """A group from item text (no group name): ``"x, ?y, ~z"`` or an iterable of such."""
        return group_from_texts(None, located_items(value), value)

    @classmethod
    def union(cls, *groups: ResourceGroup) -> ResourceGroup:
        """The items of all groups in first-seen order, duplicates removed."""
        return cls(item for group in groups for item in group._items)

    @classmethod
    def difference(cls, *groups: ResourceGroup) -> ResourceGroup:
        """The items of the first group that are in none of the others."""
        if not groups:
            return cls()
        drop = {item for group in groups[1:] for item in group._items}
        return cls(item for item in groups[0]._items if item not in drop)

    def __len__(self) -> int:
        return len(self._items)

    def match(self, worker_group: ResourceGroup | None) -> float | None:
        """This (task) group against ``worker_group``: the strongest cell, None when every
        cell is ignored; raises :class:`NoMatch`."""
        return self._match(worker_group)

    def _match(self, worker: ResourceGroup | ValueGroup | None) -> float | None:
        if worker is None or not worker._items:
            worker = EMPTY_GROUP
        elif not isinstance(worker, ResourceGroup):
            raise GroupKindMismatchError(
                "a tag group cannot be matched against a typed group",
                expected="the same typed-group declarations on both sides",
            )
        return _group_value(self, worker)

    def as_str_tuple(self) -> tuple[str, ...]:
        """The items' texts with prefix, unescaped."""
        return tuple(item.as_str() for item in self._items)

    def as_str(self) -> str:
        """The items, quoted or escaped, joined by ``,``."""
        return ",".join(written_item(item.as_str()) for item in self._items)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, ResourceGroup):
            return NotImplemented
        return self._items == other._items

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"ResourceGroup.create({self.as_str()!r})"


def _group_value(task: ResourceGroup, worker: ResourceGroup) -> float | None:
    """The match table over two tag groups (docs/notations/momotor.md#matching), by sets.

    Each value has one mode per group, so the group's cells follow from set relations:
    NoMatch when a required value of either side is not offered by the other (absent or
    excluded there), or an excluded value of either side is offered by the other; otherwise
    the strongest cell is STRONGEST if both require a common value, else STRONG if the task
    requires any (all of them are offered), else WEAK if the worker requires any (the task
    offers them all optionally), else WEAKEST if both offer a common value, else none.
    Resources.match inlines the same steps.
    """
    task_required = task._required
    worker_offered = worker._offered
    if not task_required <= worker_offered:
        raise NoMatch
    worker_required = worker._required
    task_offered = task._offered
    if not worker_required <= task_offered:
        raise NoMatch
    if task._excluded and not task._excluded.isdisjoint(worker_offered):
        raise NoMatch
    if worker._excluded and not worker._excluded.isdisjoint(task_offered):
        raise NoMatch
    if task_required:
        return STRONG if task_required.isdisjoint(worker_required) else STRONGEST
    if worker_required:
        return WEAK
    return None if task_offered.isdisjoint(worker_offered) else WEAKEST


# Interned groups by their items; equal items give the same object.
INTERNED_GROUPS: dict[tuple[ResourceItem, ...], ResourceGroup] = {}
_new_object: Final = object.__new__


def intern_group(index: dict[str, ResourceItem]) -> ResourceGroup:
    """The one group object with these items (groups recur across definitions)."""
    items = tuple(index.values())
    group = INTERNED_GROUPS.get(items)
    return new_group(items) if group is None else group


def new_group(items: tuple[ResourceItem, ...]) -> ResourceGroup:
    """A group not interned yet, interned now."""
    if len(INTERNED_GROUPS) >= INTERN_LIMIT:
        INTERNED_GROUPS.clear()
    group = _new_object(ResourceGroup)
    group._init(items)
    INTERNED_GROUPS[items] = group
    return group


EMPTY_GROUP: Final = ResourceGroup()

AnyGroup: TypeAlias = "ResourceGroup | ValueGroup"


def group_from_texts(
    name: str | None, items: Iterable[Located], text: str | Iterable[str]
) -> ResourceGroup:
    """The interned group of located item texts; a tag in two modes is an error at its
    position."""
    index: dict[str, ResourceItem] = {}
    for item_text, at in items:
        tag = intern_tag(item_text)
        old = index.setdefault(tag.value, tag)
        if old is not tag:
            raise located_conflict(name, old, tag, text if isinstance(text, str) else None, at)
    return intern_group(index)


def located_conflict(
    name: str | None, old: ResourceItem, new: ResourceItem, text: str | None, at: int
) -> ConflictingModesError:
    """``conflicting_modes`` with the text and the position where the second mode was found."""
    error = conflicting_modes(name, old, new)
    error.text = text
    error.position = at
    error.args = (error._render(),)
    return error


def clear_interned_groups() -> None:
    """Forget every interned group (benchmarks start cold with it)."""
    INTERNED_GROUPS.clear()
