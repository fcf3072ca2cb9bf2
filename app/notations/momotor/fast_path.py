"""The fast path of the Momotor parser: ordinary definitions by C-level string splits.

Most definitions are plain ``name: item, item; name: item`` lines, perhaps with a quoted or
escaped value. Quoted spans and escapes are first swapped for private-use characters (one
per span, so that plain string splitting cannot cut them); the text is then cut with
str/regex splits and the spans are put back into the item texts with one ``str.translate``.
Whatever the scanner (:mod:`app.notations.momotor.scanner`) treats specially (an error, an
empty quote pair, a quote or escape in a name, blanks before a backslash, a name ended by
another character than ``:``) makes the fast path return None, and the scanner decides, so
both paths always agree (tested against each other and against Momotor).
"""

from __future__ import annotations

import re
from typing import Final

from app.notations.momotor.groups import (
    INTERNED_GROUPS,
    ResourceGroup,
    intern_group,
    new_group,
)
from app.notations.momotor.items import INTERN_LIMIT, INTERNED_TAGS, ResourceItem, intern_tag
from app.notations.momotor.scanner import BLANKS

__all__ = ["FastPathFallback", "clear_fast_path_tables", "merge_tag_groups", "parse_fast"]

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


class FastPathFallback(Exception):
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
                raise FastPathFallback  # an empty quote pair affects blanks around it
            if "\\" in literal:
                literal = _UNESCAPE_RE.sub(r"\1", literal)
        code = _PRIVATE_FIRST + len(table)
        table[code] = literal
        return chr(code)

    try:
        protected = _PROTECTED_RE.sub(swap, text)
    except FastPathFallback:
        return None
    if len(table) > _PRIVATE_COUNT or "'" in protected or '"' in protected or "\\" in protected:
        return None  # too many spans, an unmatched quote or a trailing backslash
    return protected, table


def _fast_name(head: str) -> str | None:
    """The group name written before a ":", or None when the scanner must read it."""
    name = head.strip(BLANKS)
    if not _FAST_NAME_RE.fullmatch(name):
        return None
    if len(_NAMES) >= INTERN_LIMIT:
        _NAMES.clear()
    _NAMES[head] = name
    return name


def _group_of_texts(key: str | tuple[str, ...], texts: list[str]) -> ResourceGroup:
    """The interned group of the item texts ``texts`` (``key`` names them); FastPathFallback on a
    tag in two modes."""
    get = INTERNED_TAGS.get
    if len(texts) == 1:  # the most common group size: no duplicates to look for
        text = texts[0]
        items: tuple[ResourceItem, ...] = (get(text) or intern_tag(text),)
    else:
        tags = [get(text) or intern_tag(text) for text in texts]
        index: dict[str, ResourceItem] = {tag[0]: tag for tag in tags}
        if len(index) != len(tags):
            # Repeated values: exact duplicates collapse (the first stays), two modes are
            # an error that the scanner reports with its position.
            index = {}
            for tag in tags:
                old = index.setdefault(tag[0], tag)
                if old is not tag and old != tag:
                    raise FastPathFallback
        items = tuple(index.values())
    group = INTERNED_GROUPS.get(items)
    if group is None:
        group = new_group(items)
    if len(_GROUP_TEXTS) >= INTERN_LIMIT:
        _GROUP_TEXTS.clear()
    _GROUP_TEXTS[key] = group
    return group


def parse_fast(text: str) -> dict[str, ResourceGroup] | None:
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
            rest = rest.strip(BLANKS)
            # Private-use stand-ins are not ASCII, so an ASCII items text holds none.
            if not loose and (table is None or rest.isascii()):
                # The items text is the group's value: ",".join of its item texts.
                group = known.get(rest)
                if group is None:
                    group = _group_of_items_text(rest)
            else:
                texts = rest.split(",")
                if loose:
                    texts = [piece.strip(BLANKS) for piece in texts]
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
                groups[name] = merge_tag_groups(old, group)  # a repeated group name merges
    except FastPathFallback:
        return None
    return groups


def _group_of_items_text(rest: str) -> ResourceGroup:
    """The group of an items text with no blanks around its commas and no stand-ins."""
    texts = rest.split(",")
    if "" in texts:
        texts = [piece for piece in texts if piece]  # "", ",," or a trailing ","
    return _group_of_texts(rest, texts)


def merge_tag_groups(first: ResourceGroup, second: ResourceGroup) -> ResourceGroup:
    """Two groups of one repeated name merged (Momotor merges them); FastPathFallback on a
    tag in two modes, so that the scanner reports it with its position."""
    index = {item[0]: item for item in first._items}
    for item in second._items:
        old = index.setdefault(item.value, item)
        if old is not item and old != item:
            raise FastPathFallback
    return intern_group(index)


def clear_fast_path_tables() -> None:
    """Forget the known group names and items texts (benchmarks start cold with it)."""
    _NAMES.clear()
    _GROUP_TEXTS.clear()
