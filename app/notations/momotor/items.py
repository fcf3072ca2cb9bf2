"""Momotor tag items: ``x`` required, ``?x`` optional, ``~x`` excluded, and the match table.

Single-tag match table (task rows, worker columns; "ignored" adds nothing to the group)::

    task \\ worker | x          | ?x        | ~x      | absent
    x             | STRONGEST  | STRONG    | NoMatch | NoMatch
    ?x            | WEAK       | WEAKEST   | NoMatch | ignored
    ~x            | NoMatch    | NoMatch   | ignored | ignored
    absent        | NoMatch    | ignored   | ignored |

Tags recur across definitions far more than whole strings do, so they are interned by their
text (:func:`intern_tag`); the parsers build every tag through it. The quoting helpers here
write items and group names back as Momotor's ``as_str`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final, Self, TypeAlias

from app.notations.momotor.errors import RequiredExcludedError
from app.notations.momotor.scanner import located_items
from app.notations.momotor.strengths import STRONG, STRONGEST, WEAK, WEAKEST, NoMatch

__all__ = ["ResourceItem", "Tag"]

# Modes, numbered so that tuple order is Momotor's ``<``: excluded < required < optional.
EXCLUDED: Final = 0
REQUIRED: Final = 1
OPTIONAL: Final = 2
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


def written_item(text: str) -> str:
    """An item's text (prefix included) as ``as_str`` writes it."""
    if text.startswith(" ") or text.endswith(" ") or "\t" in text or "\n" in text:
        return _quote(text)
    return _ESCAPE_RE.sub(r"\\\1", text)


def written_name(name: str) -> str:
    """A group name as ``as_str`` writes it: bare when a word, else quoted."""
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
        mode = REQUIRED if required else EXCLUDED if excluded else OPTIONAL
        return tuple.__new__(cls, (value, mode))

    @property
    def value(self) -> str:
        """The tag's value, without prefix."""
        return self[0]

    @property
    def required(self) -> bool:
        """Written without prefix."""
        return self[1] == REQUIRED

    @property
    def optional(self) -> bool:
        """Written with ``?``: neither required nor excluded."""
        return self[1] == OPTIONAL

    @property
    def excluded(self) -> bool:
        """Written with ``~``."""
        return self[1] == EXCLUDED

    @classmethod
    def create(cls, value: str | Iterable[str]) -> Iterator[ResourceItem]:
        """The items written in ``value`` (item syntax only, no group names)."""
        for text, _ in located_items(value):
            yield intern_tag(text)

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
            return tuple.__new__(cls, (value[1:], OPTIONAL))
        if first == "~":
            return tuple.__new__(cls, (value[1:], EXCLUDED))
        return tuple.__new__(cls, (value, REQUIRED))


def _cell(cell: _Cell) -> float | None:
    if isinstance(cell, _Reject):
        raise NoMatch
    return cell


# Interned tags by their unescaped text; equal texts give the same object.
INTERNED_TAGS: dict[str, Tag] = {}
_new_tuple: Final = tuple.__new__
INTERN_LIMIT: Final = 1 << 16


def intern_tag(text: str) -> Tag:
    """The one :class:`Tag` for ``text`` (created on first sight; equal texts share it)."""
    tag = INTERNED_TAGS.get(text)
    if tag is None:
        if len(INTERNED_TAGS) >= INTERN_LIMIT:
            INTERNED_TAGS.clear()
        # Tag(text), without the extra call: this runs for every new tag text.
        first = text[:1]
        if first == "?":
            tag = _new_tuple(Tag, (text[1:], OPTIONAL))
        elif first == "~":
            tag = _new_tuple(Tag, (text[1:], EXCLUDED))
        else:
            tag = _new_tuple(Tag, (text, REQUIRED))
        INTERNED_TAGS[text] = tag
    return tag


def clear_interned_tags() -> None:
    """Forget every interned tag (benchmarks start cold with it)."""
    INTERNED_TAGS.clear()
