"""Momotor's two-step scanner for resource definitions (``Resources.from_string``).

Step 1 splits a definition into groups (name, items text), step 2 splits an items text at
``,`` into unquoted, unescaped items, each with the position of its first character. The
scanner mirrors Momotor character by character, quirks included (blanks jump past escapes,
quotes and escapes cannot protect a ``?``/``~`` prefix), and it is the path that reports
every error with its position. :mod:`app.notations.momotor.fast_path` handles ordinary
definitions faster and hands everything unusual back here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, TypeAlias

from app.notations.momotor.errors import (
    ItemColonError,
    MissingGroupNameError,
    TrailingBackslashError,
    UnmatchedQuoteError,
)

__all__ = ["split_items", "split_resources"]

BLANKS: Final = " \t"
_QUOTES: Final = "'\""
_NAME_PUNCT: Final = "-_."

# One located item: unescaped text and the position of its first character.
Located: TypeAlias = tuple[str, int]


class RawGroup:
    """A group as the group scanner emits it: name and the items text, char by char."""

    __slots__ = ("chars", "end", "name", "positions")

    def __init__(self, name: str, chars: list[str], positions: list[int], end: int) -> None:
        self.name = name
        self.chars = chars
        self.positions = positions
        self.end = end


def _unmatched_quote(quote: str, text: str, quote_at: int) -> UnmatchedQuoteError:
    """The error for a quote opened at ``quote_at`` that the input never closes (both steps
    report it alike)."""
    return UnmatchedQuoteError(
        f"the quote {quote} opened here is never closed",
        text=text,
        position=quote_at,
        expected=f"a closing {quote}",
    )


def _stripped_bounds(text: str) -> tuple[int, int]:
    stripped = text.strip()
    if not stripped:
        return 0, 0
    start = len(text) - len(text.lstrip())
    return start, start + len(stripped)


def scan_groups(text: str) -> list[RawGroup]:
    """Step 1: split the stripped input into groups (name, items text with positions).

    In the items text escapes and quotes are kept for the item scanner; in names they are
    consumed. Whitespace waiting to be added is held in ``pending`` so that trailing blanks
    vanish; an escaped character is added without it, which is why blanks jump past escapes
    (Momotor quirk Q8).

    Over 80 lines on purpose: it is one character loop whose eight local states (name or
    items, quote, escape, pending blanks, ...) every branch reads and writes, as in
    Momotor's own scanner; split into functions, the state would travel through every
    call and the one-to-one reading against Momotor's loop, which the quirks rest on,
    would be lost.
    """
    start, end = _stripped_bounds(text)
    groups: list[RawGroup] = []
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
        elif char in BLANKS:
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
            groups.append(RawGroup(name, chars, positions, index))
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
        raise _unmatched_quote(quote, text, quote_at)
    return groups


def scan_items(
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
        elif char in BLANKS:
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
        raise _unmatched_quote(quote, text, quote_at)
    if escape_at >= 0:
        raise TrailingBackslashError(
            "the items end in a backslash that escapes nothing",
            text=text,
            position=escape_at,
            expected="a character after the backslash, or '\\\\' for a backslash",
        )
    return items


def located_items(value: str | Iterable[str]) -> Iterator[Located]:
    """The non-empty located items of an item text or of each text in an iterable."""
    texts = [value] if isinstance(value, str) else value
    for text in texts:
        for item in scan_items(text, range(len(text)), len(text), text):
            if item[0]:
                yield item


def split_resources(text: str) -> Iterator[tuple[str, str]]:
    """Step 1 alone: ``(name, items text)`` per group, escapes and quotes kept in items."""
    for raw in scan_groups(text):
        yield raw.name, "".join(raw.chars)


def split_items(text: str) -> Iterator[str]:
    """Step 2 alone: the unescaped item texts, empty ones included."""
    for item, _ in scan_items(text, range(len(text)), len(text), text):
        yield item


def parse_located(text: str) -> list[tuple[str, list[Located]]]:
    """Groups of one definition string with item positions (both Momotor steps)."""
    return items_of_groups(scan_groups(text), text)


def items_of_groups(raws: list[RawGroup], text: str) -> list[tuple[str, list[Located]]]:
    """Step 2 over the groups of one string, in input order."""
    return [
        (
            raw.name,
            [item for item in scan_items(raw.chars, raw.positions, raw.end, text) if item[0]],
        )
        for raw in raws
    ]
