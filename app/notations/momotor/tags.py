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

Deliberate differences from Momotor, each tested in tests/notations/test_tags_parity.py:

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
path parses ordinary definitions, quoted and escaped values included, with C-level string
splits (quoted spans and escapes stand in as private-use characters meanwhile), and falls
back to a two-pass scanner that mirrors Momotor's for anything unusual and for every error.
Tags and groups are interned by value (they recur across definitions far more than whole
strings do); each group holds its required, offered and excluded values as frozensets, so
``match`` decides a group pair with a few set operations. ``from_string`` also keeps an LRU
cache of exact strings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Self, TypeAlias

from app.notations.errors import NotationError

if TYPE_CHECKING:
    from app.notations.momotor.typed_groups import ValueGroup
    from app.notations.quantities import ValueType

__all__ = [
    "NEUTRAL",
    "STRONG",
    "STRONGEST",
    "WEAK",
    "WEAKEST",
    "ConflictingModesError",
    "GroupKindMismatchError",
    "ItemColonError",
    "MissingGroupNameError",
    "NoMatch",
    "RequiredExcludedError",
    "ResourceGroup",
    "ResourceItem",
    "Resources",
    "Tag",
    "TagsError",
    "TrailingBackslashError",
    "UnmatchedQuoteError",
    "split_items",
    "split_resources",
]

#: Both sides require the tag: the best possible match.
STRONGEST: Final[float] = -math.inf
#: The task requires the tag, the worker offers it optionally.
STRONG: Final[float] = -1.0
#: Nothing matched, nothing was rejected.
NEUTRAL: Final[float] = 0.0
#: The worker requires the tag, the task only accepts it.
WEAK: Final[float] = 1.0
#: Both sides merely accept the tag: the worst possible match (Momotor quirk Q3).
WEAKEST: Final[float] = math.inf


class NoMatch(Exception):
    """The task and the worker cannot be matched (a required tag is missing or excluded)."""


# ---------------------------------------------------------------------------------------
# Errors


class TagsError(NotationError):
    """A Momotor resource definition is malformed."""

    notation = "momotor-tags"


class MissingGroupNameError(TagsError):
    """A group separator (``;`` or newline) or the end of the input came while a group name
    was still being read: the name was not followed by ``:`` or an item."""


class UnmatchedQuoteError(TagsError):
    """A single or double quote was opened and never closed."""


class ItemColonError(TagsError):
    """An item contains an unquoted, unescaped ``:``."""


class TrailingBackslashError(TagsError):
    """The input ends in a backslash that escapes nothing."""


class ConflictingModesError(TagsError):
    """One group names the same tag in two modes (required, optional, excluded)."""


class RequiredExcludedError(TagsError):
    """An item was built as both required and excluded."""


class GroupKindMismatchError(TagsError):
    """A group is typed on one side of a match and a tag group (or another type) on the other."""


# ---------------------------------------------------------------------------------------
# Items

# Modes, numbered so that tuple order is Momotor's ``<``: excluded < required < optional.
_EXCLUDED: Final = 0
_REQUIRED: Final = 1
_OPTIONAL: Final = 2
_PREFIX: Final = ("~", "", "?")


class _Reject:
    """The NoMatch cell of the match table."""


_REJECT: Final = _Reject()
_Cell: TypeAlias = "float | _Reject | None"

# _TABLE[task mode][worker mode]; None is "ignored".
_TABLE: Final[tuple[tuple[_Cell, ...], ...]] = (
    (None, _REJECT, _REJECT),  # task ~t against worker ~t, t, ?t
    (_REJECT, STRONGEST, STRONG),  # task t
    (_REJECT, WEAK, WEAKEST),  # task ?t
)
# The task has no item with the worker's value: worker ~t, t, ?t.
_MISSING: Final[tuple[_Cell, ...]] = (None, _REJECT, None)

# Characters written with a backslash in an unquoted item.
_ESCAPE_RE: Final = re.compile(r"""([,:;'"\\])""")
_BARE_NAME_RE: Final = re.compile(r"\w+")


def _quote(text: str) -> str:
    """Momotor's quoting: double quotes when the text holds ``'``, else single quotes."""
    escaped = text.replace("\\", "\\\\")
    if "'" in text:
        if '"' in text:
            escaped = escaped.replace('"', '\\"')
        return f'"{escaped}"'
    return f"'{escaped}'"


def _item_text(text: str) -> str:
    """An item's text (prefix included) as ``as_str`` writes it."""
    if text.startswith(" ") or text.endswith(" ") or "\t" in text or "\n" in text:
        return _quote(text)
    return _ESCAPE_RE.sub(r"\\\1", text)


def _name_text(name: str) -> str:
    return name if _BARE_NAME_RE.fullmatch(name) else _quote(name)


class ResourceItem(tuple[str, int]):
    """One item of a group: a value with a mode (required, optional or excluded).

    Immutable. Underneath it is the tuple ``(value, mode)``, so equality, hashing and ``<``
    (by value, then excluded < required < optional, as in Momotor) run at C speed; a
    :class:`Tag` equals a plain item with the same fields.
    """

    __slots__ = ()

    def __new__(cls, value: str, required: bool, excluded: bool) -> Self:
        if required and excluded:
            raise RequiredExcludedError(
                f"item {value!r} cannot be both required and excluded",
                text=value,
                position=0,
                expected="required=True or excluded=True, not both",
            )
        mode = _REQUIRED if required else _EXCLUDED if excluded else _OPTIONAL
        return tuple.__new__(cls, (value, mode))

    @property
    def value(self) -> str:
        """The tag's value, without prefix."""
        return self[0]

    @property
    def required(self) -> bool:
        """Written without prefix."""
        return self[1] == _REQUIRED

    @property
    def optional(self) -> bool:
        """Written with ``?``: neither required nor excluded."""
        return self[1] == _OPTIONAL

    @property
    def excluded(self) -> bool:
        """Written with ``~``."""
        return self[1] == _EXCLUDED

    @classmethod
    def create(cls, value: str | Iterable[str]) -> Iterator[ResourceItem]:
        """The items written in ``value`` (item syntax only, no group names)."""
        for text, _ in _items_of(value):
            yield _tag(text)

    def comparable(self, worker: ResourceItem) -> bool:
        """Whether ``compare`` applies: same class and the same value."""
        return type(self) is type(worker) and self[0] == worker[0]

    def compare(self, worker: ResourceItem) -> float | None:
        """The match-table cell for this task item against ``worker``; None is "ignored"."""
        return _cell(_TABLE[self[1]][worker[1]])

    @classmethod
    def compare_missing(cls, worker: ResourceItem) -> float | None:
        """The cell for a worker item the task does not name; None is "ignored"."""
        return _cell(_MISSING[worker[1]])

    def as_str(self) -> str:
        """The prefix (``?``, ``~`` or none) followed by the value."""
        return _PREFIX[self[1]] + self[0]

    def __str__(self) -> str:
        return self.as_str()

    def __repr__(self) -> str:
        return f"Tag({self.as_str()!r})"

    def __reduce__(self) -> tuple[type[ResourceItem], tuple[str, bool, bool]]:
        return ResourceItem, (self[0], self.required, self.excluded)


class Tag(ResourceItem):
    """A tag written as text: ``x`` required, ``?x`` optional, ``~x`` excluded.

    Only the first character is a prefix, so ``??x`` is optional ``?x`` and ``~`` alone is
    excluded with an empty value (Momotor quirk Q10).
    """

    __slots__ = ()

    def __new__(cls, value: str) -> Self:
        first = value[:1]
        if first == "?":
            return tuple.__new__(cls, (value[1:], _OPTIONAL))
        if first == "~":
            return tuple.__new__(cls, (value[1:], _EXCLUDED))
        return tuple.__new__(cls, (value, _REQUIRED))


def _cell(cell: _Cell) -> float | None:
    if isinstance(cell, _Reject):
        raise NoMatch
    return cell


# Interned tags by their unescaped text; equal texts give the same object.
_TAGS: dict[str, Tag] = {}
_new_tuple: Final = tuple.__new__
_INTERN_LIMIT: Final = 1 << 16


def _tag(text: str) -> Tag:
    tag = _TAGS.get(text)
    if tag is None:
        if len(_TAGS) >= _INTERN_LIMIT:
            _TAGS.clear()
        # Tag(text), without the extra call: this runs for every new tag text.
        first = text[:1]
        if first == "?":
            tag = _new_tuple(Tag, (text[1:], _OPTIONAL))
        elif first == "~":
            tag = _new_tuple(Tag, (text[1:], _EXCLUDED))
        else:
            tag = _new_tuple(Tag, (text, _REQUIRED))
        _TAGS[text] = tag
    return tag


# ---------------------------------------------------------------------------------------
# Groups


def _conflict(group: str | None, old: ResourceItem, new: ResourceItem) -> ConflictingModesError:
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
                raise _conflict(None, old, item)
        self._init(tuple(index.values()))

    def _init(self, items: tuple[ResourceItem, ...]) -> None:
        # Called once per distinct group (groups are interned), so it may do the work that
        # makes every later match cheap.
        required: list[str] = []
        optional: list[str] = []
        excluded: list[str] = []
        for value, mode in items:
            if mode == _REQUIRED:
                required.append(value)
            elif mode == _OPTIONAL:
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
        return _group_from_texts(None, _items_of(value), value)

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
            worker = _EMPTY_GROUP
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
        return ",".join(_item_text(item.as_str()) for item in self._items)

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


_GROUPS: dict[tuple[ResourceItem, ...], ResourceGroup] = {}
_new_object: Final = object.__new__


def _intern_group(index: dict[str, ResourceItem]) -> ResourceGroup:
    """The one group object with these items (groups recur across definitions)."""
    items = tuple(index.values())
    group = _GROUPS.get(items)
    return _new_group(items) if group is None else group


def _new_group(items: tuple[ResourceItem, ...]) -> ResourceGroup:
    """A group not interned yet, interned now."""
    if len(_GROUPS) >= _INTERN_LIMIT:
        _GROUPS.clear()
    group = _new_object(ResourceGroup)
    group._init(items)
    _GROUPS[items] = group
    return group


_EMPTY_GROUP: Final = ResourceGroup()

AnyGroup: TypeAlias = "ResourceGroup | ValueGroup"
Typed: TypeAlias = "Mapping[str, ValueType | str] | None"

# ---------------------------------------------------------------------------------------
# Scanning (Momotor's ``Resources.from_string``)

_BLANK: Final = " \t"
_QUOTES: Final = "'\""
_NAME_PUNCT: Final = "-_."

# One located item: unescaped text and the position of its first character.
_Located: TypeAlias = tuple[str, int]


class _RawGroup:
    """A group as the group scanner emits it: name and the items text, char by char."""

    __slots__ = ("chars", "end", "name", "positions")

    def __init__(self, name: str, chars: list[str], positions: list[int], end: int) -> None:
        self.name = name
        self.chars = chars
        self.positions = positions
        self.end = end


def _stripped_bounds(text: str) -> tuple[int, int]:
    stripped = text.strip()
    if not stripped:
        return 0, 0
    start = len(text) - len(text.lstrip())
    return start, start + len(stripped)


def _scan_groups(text: str) -> list[_RawGroup]:
    """Step 1: split the stripped input into groups (name, items text with positions).

    In the items text escapes and quotes are kept for the item scanner; in names they are
    consumed. Whitespace waiting to be added is held in ``pending`` so that trailing blanks
    vanish; an escaped character is added without it, which is why blanks jump past escapes
    (Momotor quirk Q8).
    """
    start, end = _stripped_bounds(text)
    groups: list[_RawGroup] = []
    if start == end:
        return groups
    chars: list[str] = []
    positions: list[int] = []
    pending: list[tuple[str, int]] = []
    in_name = True
    name = ""
    quote = ""
    quote_at = -1
    escape_at = -1
    for index in range(start, end + 1):
        char = text[index] if index < end else "\n"
        if escape_at >= 0:
            if not in_name:
                chars.append("\\")
                positions.append(escape_at)
            chars.append(char)
            positions.append(index)
            if index == end:
                # The invented final newline was escaped: the input ends in a backslash.
                if quote:
                    break
                raise TrailingBackslashError(
                    "the input ends in a backslash that escapes nothing",
                    text=text,
                    position=escape_at,
                    expected="a character after the backslash, or '\\\\' for a backslash",
                )
            escape_at = -1
        elif char == "\\":
            escape_at = index
        elif quote:
            if char == quote:
                quote = ""
                if in_name:
                    continue
            chars.append(char)
            positions.append(index)
        elif char in _BLANK:
            if chars:
                pending.append((char, index))
        elif char in _QUOTES:
            for blank, at in pending:
                chars.append(blank)
                positions.append(at)
            pending.clear()
            quote = char
            quote_at = index
            if not in_name:
                chars.append(char)
                positions.append(index)
        elif char == ";" or char == "\n":
            if in_name:
                buffer = "".join(chars)
                where = "the end of the input" if index == end else f"{char!r}"
                raise MissingGroupNameError(
                    f"missing key in {buffer!r}: {where} came before the group name ended",
                    text=text,
                    position=index,
                    expected="':' or an item after the group name",
                )
            groups.append(_RawGroup(name, chars, positions, index))
            chars, positions, pending = [], [], []
            in_name = True
        elif in_name and not (char.isalnum() or char in _NAME_PUNCT):
            name = "".join(chars)
            chars, positions, pending = [], [], []
            in_name = False
            if char != ":":
                chars.append(char)
                positions.append(index)
        else:
            for blank, at in pending:
                chars.append(blank)
                positions.append(at)
            pending.clear()
            chars.append(char)
            positions.append(index)
    if quote:
        raise UnmatchedQuoteError(
            f"the quote {quote} opened here is never closed",
            text=text,
            position=quote_at,
            expected=f"a closing {quote}",
        )
    return groups


def _scan_items(
    chars: list[str] | str, positions: list[int] | range, end: int, text: str
) -> list[tuple[str, int]]:
    """Step 2: split an items text at ``,`` into unescaped, unquoted item texts.

    Empty items (``,,``, a trailing ``,``, ``''``, blanks only) are kept as ``""`` so that
    :func:`split_items` can yield them; callers drop them.
    """
    items: list[tuple[str, int]] = []
    buffer: list[str] = []
    pending: list[str] = []
    first = -1
    quote = ""
    quote_at = -1
    escape_at = -1
    count = len(chars)
    for step, (char, at) in enumerate(zip([*chars, ","], [*positions, end], strict=True)):
        if escape_at >= 0:
            if step == count:
                break  # the invented final "," was escaped: reported below
            buffer.append(char)
            escape_at = -1
        elif char == "\\":
            escape_at = at
            if first < 0:
                first = at
        elif quote:
            if char == quote:
                quote = ""
            else:
                buffer.append(char)
        elif char in _BLANK:
            if buffer:
                pending.append(char)
        elif char in _QUOTES:
            buffer.extend(pending)
            pending.clear()
            quote = char
            quote_at = at
            if first < 0:
                first = at
        elif char == ",":
            items.append(("".join(buffer), first if first >= 0 else at))
            buffer.clear()
            pending.clear()
            first = -1
        elif char == ":":
            raise ItemColonError(
                "colons in items must be escaped",
                text=text,
                position=at,
                expected="'\\:' or a quoted item instead of ':'",
            )
        else:
            buffer.extend(pending)
            pending.clear()
            buffer.append(char)
            if first < 0:
                first = at
    if quote:
        raise UnmatchedQuoteError(
            f"the quote {quote} opened here is never closed",
            text=text,
            position=quote_at,
            expected=f"a closing {quote}",
        )
    if escape_at >= 0:
        raise TrailingBackslashError(
            "the items end in a backslash that escapes nothing",
            text=text,
            position=escape_at,
            expected="a character after the backslash, or '\\\\' for a backslash",
        )
    return items


def _items_of(value: str | Iterable[str]) -> Iterator[_Located]:
    """The non-empty located items of an item text or of each text in an iterable."""
    texts = [value] if isinstance(value, str) else value
    for text in texts:
        for item in _scan_items(text, range(len(text)), len(text), text):
            if item[0]:
                yield item


def split_resources(text: str) -> Iterator[tuple[str, str]]:
    """Step 1 alone: ``(name, items text)`` per group, escapes and quotes kept in items."""
    for raw in _scan_groups(text):
        yield raw.name, "".join(raw.chars)


def split_items(text: str) -> Iterator[str]:
    """Step 2 alone: the unescaped item texts, empty ones included."""
    for item, _ in _scan_items(text, range(len(text)), len(text), text):
        yield item


def _parse_located(text: str) -> list[tuple[str, list[_Located]]]:
    """Groups of one definition string with item positions (both Momotor steps)."""
    return _items_of_groups(_scan_groups(text), text)


def _items_of_groups(raws: list[_RawGroup], text: str) -> list[tuple[str, list[_Located]]]:
    """Step 2 over the groups of one string, in input order."""
    return [
        (
            raw.name,
            [item for item in _scan_items(raw.chars, raw.positions, raw.end, text) if item[0]],
        )
        for raw in raws
    ]


# ---------------------------------------------------------------------------------------
# Fast path. Most definitions are plain "name: item, item; name: item" lines, perhaps with
# a quoted or escaped value. Quoted spans and escapes are first swapped for private-use
# characters (one per span, so that plain string splitting cannot cut them); the text is
# then cut with str/regex splits and the spans are put back into the item texts with one
# str.translate. Whatever the scanner treats specially (an error, an empty quote pair, a
# quote or escape in a name, blanks before a backslash, a name ended by another character
# than ":") makes the fast path return None, and the scanner above decides, so both paths
# always agree (tested against each other and against Momotor).

# A quoted span (escapes allowed inside) or one escaped character outside quotes.
_PROTECTED_RE: Final = re.compile(
    r"""'([^'\\]*(?:\\.[^'\\]*)*)'|"([^"\\]*(?:\\.[^"\\]*)*)"|\\(.)""", re.S
)
_UNESCAPE_RE: Final = re.compile(r"\\(.)", re.S)
# The private-use area stands in for protected spans; inputs that use it take the scanner.
_PRIVATE_FIRST: Final = 0xE000
_PRIVATE_COUNT: Final = 0x1900
_PRIVATE_RE: Final = re.compile("[\ue000-\uf8ff]")
_SEGMENTS_RE: Final = re.compile(r"[;\n]")
_FAST_NAME_RE: Final = re.compile(r"(?:[\w.\-]+(?:[ \t]+[\w.\-]+)*)?")

# Valid group names by the raw text before their ":" (group names are a small vocabulary,
# and checking one costs a regex call).
_NAMES: dict[str, str] = {}
# Groups by their item texts (unquoted, unescaped, in order), as a tuple or, for items
# without quotes or escapes, joined by ",": interning by value, since the texts determine
# the items. Definitions share groups ("language: java") far more often than they share
# whole strings.
_GROUP_TEXTS: dict[str | tuple[str, ...], ResourceGroup] = {}


class _Fallback(Exception):
    """The fast path cannot decide this input; the scanner must."""


def _protect(text: str) -> tuple[str, dict[int, str]] | None:
    """``text`` with each quoted span and escape replaced by its own private-use character,
    and the translate table that puts their literal text back; None for the scanner."""
    if not text.isascii() and _PRIVATE_RE.search(text):
        return None
    if " \\" in text or "\t\\" in text:
        return None  # blanks before a backslash move past the escaped character (quirk Q8)
    table: dict[int, str] = {}

    def swap(found: re.Match[str]) -> str:
        single, double, escaped = found.groups()
        if escaped is not None:
            literal = escaped
        else:
            literal = single if single is not None else double
            if not literal:
                raise _Fallback  # an empty quote pair affects blanks around it
            if "\\" in literal:
                literal = _UNESCAPE_RE.sub(r"\1", literal)
        code = _PRIVATE_FIRST + len(table)
        table[code] = literal
        return chr(code)

    try:
        protected = _PROTECTED_RE.sub(swap, text)
    except _Fallback:
        return None
    if len(table) > _PRIVATE_COUNT or "'" in protected or '"' in protected or "\\" in protected:
        return None  # too many spans, an unmatched quote or a trailing backslash
    return protected, table


def _fast_name(head: str) -> str | None:
    """The group name written before a ":", or None when the scanner must read it."""
    name = head.strip(_BLANK)
    if not _FAST_NAME_RE.fullmatch(name):
        return None
    if len(_NAMES) >= _INTERN_LIMIT:
        _NAMES.clear()
    _NAMES[head] = name
    return name


def _group_of_texts(key: str | tuple[str, ...], texts: list[str]) -> ResourceGroup:
    """The interned group of the item texts ``texts`` (``key`` names them); _Fallback on a
    tag in two modes."""
    get = _TAGS.get
    if len(texts) == 1:  # the most common group size: no duplicates to look for
        text = texts[0]
        items: tuple[ResourceItem, ...] = (get(text) or _tag(text),)
    else:
        tags = [get(text) or _tag(text) for text in texts]
        index: dict[str, ResourceItem] = {tag[0]: tag for tag in tags}
        if len(index) != len(tags):
            # Repeated values: exact duplicates collapse (the first stays), two modes are
            # an error that the scanner reports with its position.
            index = {}
            for tag in tags:
                old = index.setdefault(tag[0], tag)
                if old is not tag and old != tag:
                    raise _Fallback
        items = tuple(index.values())
    group = _GROUPS.get(items)
    if group is None:
        group = _new_group(items)
    if len(_GROUP_TEXTS) >= _INTERN_LIMIT:
        _GROUP_TEXTS.clear()
    _GROUP_TEXTS[key] = group
    return group


def _parse_fast(text: str) -> dict[str, ResourceGroup] | None:
    """The tag groups of one definition, or None when the scanner must decide."""
    stripped = text.strip()
    if not stripped:
        return {}
    table: dict[int, str] | None = None
    if "\\" in stripped or "'" in stripped or '"' in stripped:
        protected = _protect(stripped)
        if protected is None:
            return None
        stripped, table = protected
    # Blanks around a "," are not part of any item. ", " is by far the most common spelling,
    # so one replace over the whole text usually leaves no blank next to a comma, and the
    # items texts need no stripping one by one.
    if ", " in stripped:
        stripped = stripped.replace(", ", ",")
    loose = " ," in stripped or ", " in stripped or "\t" in stripped
    segments = _SEGMENTS_RE.split(stripped) if "\n" in stripped else stripped.split(";")
    groups: dict[str, ResourceGroup] = {}
    names = _NAMES
    known = _GROUP_TEXTS
    try:
        for segment in segments:
            head, colon, rest = segment.partition(":")
            if not colon or ":" in rest:
                return None  # no ":" (missing key, or a name ended otherwise) or a colon item
            name = names.get(head)
            if name is None:
                name = _fast_name(head)
                if name is None:
                    return None
            rest = rest.strip(_BLANK)
            # Private-use stand-ins are not ASCII, so an ASCII items text holds none.
            if not loose and (table is None or rest.isascii()):
                # The items text is the group's value: ",".join of its item texts.
                group = known.get(rest)
                if group is None:
                    group = _group_of_items_text(rest)
            else:
                texts = rest.split(",")
                if loose:
                    texts = [piece.strip(_BLANK) for piece in texts]
                if table is not None:
                    texts = [piece.translate(table) for piece in texts]
                if "" in texts:
                    texts = [piece for piece in texts if piece]  # ",," or a trailing ","
                key = tuple(texts)
                group = known.get(key)
                if group is None:
                    group = _group_of_texts(key, texts)
            old = groups.setdefault(name, group)
            if old is not group:
                groups[name] = _merge_tags(old, group)  # a repeated group name merges
    except _Fallback:
        return None
    return groups


def _group_of_items_text(rest: str) -> ResourceGroup:
    """The group of an items text with no blanks around its commas and no stand-ins."""
    texts = rest.split(",")
    if "" in texts:
        texts = [piece for piece in texts if piece]  # "", ",," or a trailing ","
    return _group_of_texts(rest, texts)


def _merge_tags(first: ResourceGroup, second: ResourceGroup) -> ResourceGroup:
    index = {item[0]: item for item in first._items}
    for item in second._items:
        old = index.setdefault(item.value, item)
        if old is not item and old != item:
            raise _Fallback
    return _intern_group(index)


# ---------------------------------------------------------------------------------------
# Building groups


def _value_types(typed: Typed) -> dict[str, ValueType]:
    if not typed:
        return {}
    from app.notations.momotor.typed_groups import declared_types

    return declared_types(typed)


def _group_from_texts(
    name: str | None, items: Iterable[_Located], text: str | Iterable[str]
) -> ResourceGroup:
    index: dict[str, ResourceItem] = {}
    for item_text, at in items:
        tag = _tag(item_text)
        old = index.setdefault(tag.value, tag)
        if old is not tag:
            raise _located_conflict(name, old, tag, text if isinstance(text, str) else None, at)
    return _intern_group(index)


def _located_conflict(
    name: str | None, old: ResourceItem, new: ResourceItem, text: str | None, at: int
) -> ConflictingModesError:
    error = _conflict(name, old, new)
    error.text = text
    error.position = at
    error.args = (error._render(),)
    return error


def _parse_texts(texts: Sequence[str], typed: dict[str, ValueType]) -> dict[str, AnyGroup]:
    """Parse and merge definition strings (Momotor step 4: first-seen order, exact
    duplicates dropped; here also a tag in two modes rejected)."""
    if not typed:
        if len(texts) == 1:
            fast = _parse_fast(texts[0])
            if fast is not None:
                return dict(fast)
        else:
            merged: dict[str, ResourceGroup] = {}
            try:
                for text in texts:
                    fast = _parse_fast(text)
                    if fast is None:
                        break
                    for name, group in fast.items():
                        before = merged.get(name)
                        merged[name] = group if before is None else _merge_tags(before, group)
                else:
                    return dict(merged)
            except _Fallback:
                pass
    # Momotor splits every string into groups before it splits any group into items, so a
    # group-level error in a later string beats an item error in an earlier one; mode
    # conflicts are found while merging, after everything parsed.
    scanned = [(text, _scan_groups(text)) for text in texts]
    parsed = [(text, _items_of_groups(raws, text)) for text, raws in scanned]
    indexes: dict[str, dict[str, ResourceItem]] = {}
    values: dict[str, list[tuple[str, int, str]]] = {}
    for text, groups in parsed:
        for name, items in groups:
            index = indexes.setdefault(name, {})
            if name in typed:
                values.setdefault(name, []).extend((t, at, text) for t, at in items)
                continue
            for item_text, at in items:
                tag = _tag(item_text)
                old = index.setdefault(tag.value, tag)
                if old is not tag:
                    raise _located_conflict(name, old, tag, text, at)
    result: dict[str, AnyGroup] = {}
    for name, index in indexes.items():
        if name in typed:
            from app.notations.momotor.typed_groups import ValueGroup

            result[name] = ValueGroup.parse(name, typed[name], values.get(name, []))
        else:
            result[name] = _intern_group(index)
    return result


def _typed_key(typed: Typed) -> tuple[tuple[str, str], ...]:
    if not typed:
        return ()
    return tuple(sorted((name, str(getattr(kind, "value", kind))) for name, kind in typed.items()))


@lru_cache(maxsize=8192)
def _cached_plain(text: str) -> Resources:
    fast = _parse_fast(text)
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
            (name, [(item, at, text) for text in texts for item, at in _items_of(text)])
            for name, texts in (
                (name, [value] if isinstance(value, str) else list(value))
                for name, value in definition.items()
            )
        ]
        groups: dict[str, AnyGroup] = {}
        for name, located in scanned:
            if name in types:
                from app.notations.momotor.typed_groups import ValueGroup

                groups[name] = ValueGroup.parse(name, types[name], located)
                continue
            index: dict[str, ResourceItem] = {}
            for item_text, at, text in located:
                tag = _tag(item_text)
                old = index.setdefault(tag.value, tag)
                if old is not tag:
                    raise _located_conflict(name, old, tag, text, at)
            groups[name] = _intern_group(index)
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
        return self._groups.get(key, _EMPTY_GROUP)

    def match(self, worker_resource: Resources) -> float:
        """This task's match against ``worker_resource``: lower is better, from STRONGEST to
        WEAKEST; NEUTRAL when nothing matched and nothing was rejected.

        Raises :class:`NoMatch` when no match is possible.
        """
        task_groups = self._groups
        worker_groups = worker_resource._groups
        worst = STRONGEST
        empty = _EMPTY_GROUP
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
            (_name_text(name) + colon + group.as_str()).strip()
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
                    raise _conflict(name, old, item)
        return _intern_group(index)
    from app.notations.momotor.typed_groups import ValueGroup

    return ValueGroup.union_named(name, parts)


def _difference_groups(name: str, group: AnyGroup, other: AnyGroup) -> AnyGroup:
    if isinstance(group, ResourceGroup) and isinstance(other, ResourceGroup):
        return ResourceGroup.difference(group, other)
    from app.notations.momotor.typed_groups import ValueGroup

    return ValueGroup.difference_named(name, group, other)


def _clear_caches() -> None:
    """Empty the string cache and the intern tables (benchmarks start cold with it)."""
    _cached_plain.cache_clear()
    _cached_from_string.cache_clear()
    _TAGS.clear()
    _GROUPS.clear()
    _GROUP_TEXTS.clear()
    _NAMES.clear()
