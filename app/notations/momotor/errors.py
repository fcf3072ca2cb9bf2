"""The errors of Momotor resource definitions: one :class:`TagsError` family.

Every error is a :class:`~app.notations.errors.NotationError` (so a ValueError) named
``momotor-tags`` and carrying the 0-based position in the string it was found in. The family
lives apart from the parser so that tag groups and typed groups can both raise it without
importing each other.
"""

from __future__ import annotations

from app.notations.errors import NotationError

__all__ = [
    "ConflictingModesError",
    "GroupKindMismatchError",
    "ItemColonError",
    "MissingGroupNameError",
    "RequiredExcludedError",
    "TagsError",
    "TrailingBackslashError",
    "UnmatchedQuoteError",
]


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
