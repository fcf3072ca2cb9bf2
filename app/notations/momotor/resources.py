"""Momotor resource definitions: tags, groups, match strengths (a drop-in for
``momotor.shared.resources`` 2.1.3).

A definition names groups of items: ``language: java, ?python; java: ?8, ?11, 12; arch: ~arm``.
An item is a *required* tag (``x``), an *optional* tag (``?x``) or an *excluded* tag (``~x``).
``task.match(worker)`` gives a strength, lower is better, or raises :class:`NoMatch`.

Parsing, ``as_str`` in its four modes and ``match`` give the same results as Momotor 2.1.3 on
every input, quirks included (docs/notations/momotor.md): empty groups count as
NEUTRAL, ``?x`` against ``?x`` is WEAKEST, a repeated group name merges, whitespace jumps past
escapes, quotes and escapes cannot protect a ``?``/``~`` prefix. Single-tag match table (task
rows, worker columns; "ignored" adds nothing to the group)::

    task \\ worker | x          | ?x        | ~x      | absent
    x             | STRONGEST  | STRONG    | NoMatch | NoMatch
    ?x            | WEAK       | WEAKEST   | NoMatch | ignored
    ~x            | NoMatch    | NoMatch   | ignored | ignored
    absent        | NoMatch    | ignored   | ignored |

A group's value is the minimum of its cells (none when every cell is ignored); the result is
the maximum over every group named on either side, a group without a value counting as
NEUTRAL.

Deliberate differences from Momotor, each tested in tests/notations/momotor/test_tags.py:

1. An input ending in an unescaped backslash raises :class:`TrailingBackslashError` (a
   ValueError) instead of a bare ``AssertionError`` (which ``python -O`` would skip).
2. A group that names one tag in two modes (``x`` with ``?x``, ``x`` with ``~x``, ``?x`` with
   ``~x``) raises :class:`ConflictingModesError` naming the group and the tag; Momotor's
   outcome there depends on the order of the items (quirk Q1/Q4). Every way of building a
   group checks this (parsing, ``from_dict``, ``union``, the constructors).
3. ``from_dict``, ``from_key_value``, ``ResourceGroup.create`` and the ``ResourceGroup``
   constructor drop exact duplicate items, as ``from_string`` does (quirk Q2).
4. :class:`Resources` and :class:`ResourceGroup` have value equality and a hash. Equality is
   order-sensitive (groups and items in order), so equal objects print the same ``as_str``.

Every parse error is a :class:`TagsError` (a :class:`~app.notations.errors.NotationError`,
so a ValueError) carrying the 0-based position in the string it was found in.

Groups declared *typed* (``Resources.from_string(text, typed={"ram": "memory"})``) hold
comparisons such as ``ram >= 1 GiB`` instead of tags; see :mod:`app.notations.momotor.typed_groups`
for their syntax and strength table. Undeclared groups are untouched Momotor tags.

Speed (bench/tags.py compares with Momotor on generated, realistic definitions): a fast
path (:mod:`app.notations.momotor.fast_path`) parses ordinary definitions, quoted and escaped
values included, with C-level string splits (quoted spans and escapes stand in as
private-use characters meanwhile), and falls back to a two-pass scanner that mirrors
Momotor's (:mod:`app.notations.momotor.scanner`) for anything unusual and for every error.
Tags and groups are interned by value (they recur across definitions far more than whole
strings do); each group holds its required, offered and excluded values as frozensets, so
``match`` decides a group pair with a few set operations. ``from_string`` also keeps an LRU
cache of exact strings.

The model is split by role: :mod:`~app.notations.momotor.strengths` (the strengths and
NoMatch), :mod:`~app.notations.momotor.errors` (the TagsError family),
:mod:`~app.notations.momotor.items` (items and the match table),
:mod:`~app.notations.momotor.groups` (groups and their match), the scanner, the fast path,
and this module (whole definitions, parsing entry points, combining, ``match``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TypeAlias

from app.notations.momotor.fast_path import (
    FastPathFallback,
    clear_fast_path_tables,
    merge_tag_groups,
    parse_fast,
)
from app.notations.momotor.groups import (
    EMPTY_GROUP,
    AnyGroup,
    ResourceGroup,
    clear_interned_groups,
    conflicting_modes,
    intern_group,
    located_conflict,
)
from app.notations.momotor.items import ResourceItem, clear_interned_tags, intern_tag, written_name
from app.notations.momotor.scanner import items_of_groups, located_items, scan_groups
from app.notations.momotor.strengths import NEUTRAL, STRONG, STRONGEST, WEAK, WEAKEST, NoMatch
from app.notations.momotor.typed_groups import ValueGroup, declared_types
from app.notations.quantities import ValueType

__all__ = ["Resources", "Typed", "clear_caches"]

Typed: TypeAlias = "Mapping[str, ValueType | str] | None"


def _value_types(typed: Typed) -> dict[str, ValueType]:
    if not typed:
        return {}
    return declared_types(typed)


def _parse_texts(texts: Sequence[str], typed: dict[str, ValueType]) -> dict[str, AnyGroup]:
    """Parse and merge definition strings (Momotor step 4: first-seen order, exact
    duplicates dropped; here also a tag in two modes rejected)."""
    if not typed:
        if len(texts) == 1:
            fast = parse_fast(texts[0])
            if fast is not None:
                return dict(fast)
        else:
            merged: dict[str, ResourceGroup] = {}
            try:
                for text in texts:
                    fast = parse_fast(text)
                    if fast is None:
                        break
                    for name, group in fast.items():
                        before = merged.get(name)
                        merged[name] = group if before is None else merge_tag_groups(before, group)
                else:
                    return dict(merged)
            except FastPathFallback:
                pass
    # Momotor splits every string into groups before it splits any group into items, so a
    # group-level error in a later string beats an item error in an earlier one; mode
    # conflicts are found while merging, after everything parsed.
    scanned = [(text, scan_groups(text)) for text in texts]
    parsed = [(text, items_of_groups(raws, text)) for text, raws in scanned]
    indexes: dict[str, dict[str, ResourceItem]] = {}
    values: dict[str, list[tuple[str, int, str]]] = {}
    for text, groups in parsed:
        for name, items in groups:
            index = indexes.setdefault(name, {})
            if name in typed:
                values.setdefault(name, []).extend((t, at, text) for t, at in items)
                continue
            for item_text, at in items:
                tag = intern_tag(item_text)
                old = index.setdefault(tag.value, tag)
                if old is not tag:
                    raise located_conflict(name, old, tag, text, at)
    result: dict[str, AnyGroup] = {}
    for name, index in indexes.items():
        if name in typed:
            result[name] = ValueGroup.parse(name, typed[name], values.get(name, []))
        else:
            result[name] = intern_group(index)
    return result


def _typed_key(typed: Typed) -> tuple[tuple[str, str], ...]:
    if not typed:
        return ()
    return tuple(sorted((name, str(getattr(kind, "value", kind))) for name, kind in typed.items()))


@lru_cache(maxsize=8192)
def _cached_plain(text: str) -> Resources:
    fast = parse_fast(text)
    return Resources._wrap(_parse_texts((text,), {}) if fast is None else fast)  # type: ignore[arg-type]


@lru_cache(maxsize=8192)
def _cached_from_string(text: str, typed_key: tuple[tuple[str, str], ...]) -> Resources:
    return Resources._wrap(_parse_texts((text,), _value_types(dict(typed_key))))


# ---------------------------------------------------------------------------------------
# Resources


class Resources:
    """A whole definition: named groups in first-seen order. Immutable, hashable, equal by
    value (group order and item order included)."""

    # _hash and _demands are left unset until first needed (parsing is hot; many parsed
    # definitions are never hashed, and only workers need _demands).
    __slots__ = ("_demands", "_groups", "_hash")

    _groups: dict[str, AnyGroup]
    _hash: int
    _demands: frozenset[str]

    def __init__(self, definition: Mapping[str, AnyGroup] | None = None) -> None:
        self._init(dict(definition or {}))

    def _init(self, groups: dict[str, AnyGroup]) -> None:
        object.__setattr__(self, "_groups", groups)

    def _find_demands(self) -> frozenset[str]:
        """The names of the groups that reject a task without them: tag groups with required
        tags and typed groups with required conditions (both have a true ``_required``)."""
        demands = frozenset(name for name, group in self._groups.items() if group._required)
        object.__setattr__(self, "_demands", demands)
        return demands

    @classmethod
    def _wrap(cls, groups: dict[str, AnyGroup]) -> Resources:
        resources = cls.__new__(cls)
        resources._init(groups)
        return resources

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Resources is immutable")

    @classmethod
    def from_string(cls, value: str | Iterable[str], *, typed: Typed = None) -> Resources:
        """Parse one definition string, or several whose groups are merged.

        ``typed`` maps group names to value types (``"memory"``, ``ValueType.INT``, ...);
        those groups hold comparisons (:mod:`app.notations.momotor.typed_groups`).
        Raises a :class:`TagsError` with the position of the problem.
        """
        if isinstance(value, str):
            if cls is Resources:
                if not typed:
                    return _cached_plain(value)
                return _cached_from_string(value, _typed_key(typed))
            return cls._wrap(_parse_texts((value,), _value_types(typed)))
        texts = list(value)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"expected str items, got {type(text).__name__}")
        return cls._wrap(_parse_texts(texts, _value_types(typed)))

    @classmethod
    def from_dict(
        cls, definition: Mapping[str, str | Iterable[str]], *, typed: Typed = None
    ) -> Resources:
        """Groups from name -> item text (or texts); names are used verbatim and ``;`` or a
        newline in the text is an ordinary character."""
        types = _value_types(typed)
        # Every group's text is scanned before any group is built: a syntax error anywhere
        # wins over a conflict of modes, as in from_string and in Momotor, which parses
        # every group and has no such conflict (the differential test found a dict whose
        # first group conflicted and whose second had an unescaped colon).
        scanned = [
            (name, [(item, at, text) for text in texts for item, at in located_items(text)])
            for name, texts in (
                (name, [value] if isinstance(value, str) else list(value))
                for name, value in definition.items()
            )
        ]
        groups: dict[str, AnyGroup] = {}
        for name, located in scanned:
            if name in types:
                groups[name] = ValueGroup.parse(name, types[name], located)
                continue
            index: dict[str, ResourceItem] = {}
            for item_text, at, text in located:
                tag = intern_tag(item_text)
                old = index.setdefault(tag.value, tag)
                if old is not tag:
                    raise located_conflict(name, old, tag, text, at)
            groups[name] = intern_group(index)
        return cls._wrap(groups)

    @classmethod
    def from_key_value(
        cls, key: str, value: str | Iterable[str], *, typed: Typed = None
    ) -> Resources:
        """One group: ``from_dict({key: value})``."""
        return cls.from_dict({key: value}, typed=typed)

    @classmethod
    def union(cls, *resources: Resources) -> Resources:
        """All groups of all inputs; a name in several inputs gets the union of its groups."""
        merged: dict[str, list[AnyGroup]] = {}
        for resource in resources:
            for name, group in resource._groups.items():
                merged.setdefault(name, []).append(group)
        groups: dict[str, AnyGroup] = {}
        for name, parts in merged.items():
            groups[name] = _union_groups(name, parts)
        return cls._wrap(groups)

    @classmethod
    def difference(cls, *resources: Resources) -> Resources:
        """The first input's groups minus the items in the union of the others; groups
        left empty (or empty already) are omitted."""
        if not resources:
            return cls()
        others = cls.union(*resources[1:])._groups
        groups: dict[str, AnyGroup] = {}
        for name, group in resources[0]._groups.items():
            other = others.get(name)
            rest = group if other is None else _difference_groups(name, group, other)
            if len(rest):
                groups[name] = rest
        return cls._wrap(groups)

    def __len__(self) -> int:
        return len(self._groups)

    def group_names(self) -> list[str]:
        """The group names in first-seen order, empty groups included."""
        return list(self._groups)

    def get(self, key: str) -> AnyGroup:
        """The group named ``key``, or an empty group when there is none."""
        return self._groups.get(key, EMPTY_GROUP)

    def match(self, worker_resource: Resources) -> float:
        """This task's match against ``worker_resource``: lower is better, from STRONGEST to
        WEAKEST; NEUTRAL when nothing matched and nothing was rejected.

        Raises :class:`NoMatch` when no match is possible.
        """
        task_groups = self._groups
        worker_groups = worker_resource._groups
        worst = STRONGEST
        empty = EMPTY_GROUP
        for name, task in task_groups.items():
            worker = worker_groups.get(name, empty)
            if type(task) is not ResourceGroup or type(worker) is not ResourceGroup:
                value = task._match(worker)  # a typed group (tag_values)
            else:
                # _group_value inlined: this loop is the hot path of matching.
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
                    if task_required.isdisjoint(worker_required):
                        value = STRONG
                    else:
                        continue  # STRONGEST: cannot raise the maximum
                elif worker_required:
                    value = WEAK
                elif task_offered.isdisjoint(worker_offered):
                    value = None
                else:
                    value = WEAKEST
            if value is None:
                value = NEUTRAL  # a group without cells counts as NEUTRAL
            if value > worst:
                worst = value
        if len(worker_groups) > len(task_groups) or not task_groups.keys() >= worker_groups.keys():
            # The worker has groups the task lacks: each counts as NEUTRAL, and rejects the
            # task when it requires something (a required tag or condition).
            try:
                demands = worker_resource._demands
            except AttributeError:
                demands = worker_resource._find_demands()
            if demands and not task_groups.keys() >= demands:
                raise NoMatch
            if worst < NEUTRAL:
                worst = NEUTRAL
        return worst if task_groups or worker_groups else NEUTRAL

    def as_tuples(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """``(name, item texts with prefix, unescaped)`` per group."""
        for name, group in self._groups.items():
            yield name, group.as_str_tuple()

    def as_str_tuples(self) -> Iterator[tuple[str, str]]:
        """``(name, the group's escaped items string)`` per group."""
        for name, group in self._groups.items():
            yield name, group.as_str()

    def as_str(self, *, multiline: bool = False, compact: bool = False) -> str:
        """The definition as text that ``from_string`` parses back.

        Groups are joined by ``"; "`` (``";"`` when compact, a newline when multiline);
        multiline without compact ends with a newline. No groups give ``""``.
        """
        if not self._groups:
            return ""
        colon = ":" if compact else ": "
        lines = [
            (written_name(name) + colon + group.as_str()).strip()
            for name, group in self._groups.items()
        ]
        if multiline:
            return "\n".join(lines) + ("" if compact else "\n")
        return (";" if compact else "; ").join(lines)

    def __str__(self) -> str:
        return "{" + self.as_str() + "}"

    def __repr__(self) -> str:
        return f"Resources.from_string({self.as_str()!r})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Resources):
            return NotImplemented
        return list(self._groups.items()) == list(other._groups.items())

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            value = hash(tuple(self._groups.items()))
            object.__setattr__(self, "_hash", value)
            return value


def _union_groups(name: str, parts: list[AnyGroup]) -> AnyGroup:
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(part, ResourceGroup) for part in parts):
        index: dict[str, ResourceItem] = {}
        for part in parts:
            assert isinstance(part, ResourceGroup)
            for item in part._items:
                old = index.get(item.value)
                if old is None:
                    index[item.value] = item
                elif old != item:
                    raise conflicting_modes(name, old, item)
        return intern_group(index)
    return ValueGroup.union_named(name, parts)


def _difference_groups(name: str, group: AnyGroup, other: AnyGroup) -> AnyGroup:
    if isinstance(group, ResourceGroup) and isinstance(other, ResourceGroup):
        return ResourceGroup.difference(group, other)
    return ValueGroup.difference_named(name, group, other)


def clear_caches() -> None:
    """Empty the string cache and the intern tables (benchmarks start cold with it)."""
    _cached_plain.cache_clear()
    _cached_from_string.cache_clear()
    clear_interned_tags()
    clear_interned_groups()
    clear_fast_path_tables()
