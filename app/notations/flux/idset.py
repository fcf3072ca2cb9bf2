"""RFC 22 idsets: sets of non-negative integers written as ``1-3,5,7-9``.

The model keeps maximal runs ``(lo, hi)`` rather than the ids themselves, so ``0-2147483647``
costs two integers, not two billion. Parsing is strict RFC 22
(docs/notations/flux.md#rfc-22-idsets):
decimal ids without leading zeros, strictly ascending elements, ``lo-hi`` with ``hi > lo``, at
most one pair of enclosing brackets, no whitespace, no empty elements. flux-core's leniency of
skipping empty tokens (``1,,2``) is deliberately not copied.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from app.notations.errors import NotationError

#: Largest id accepted; flux-core's IDSET_MAX_UNIVERSE is 2^31, and SQL INTEGER columns agree.
IDSET_MAX_ID = 2**31 - 1
#: Plain (unranged) encoding lists every id; refuse beyond this many so output stays bounded.
PLAIN_ENCODE_MAX_IDS = 1_000_000

_ELEMENT = re.compile(r"([0-9]+)(?:-([0-9]+))?")


class IdsetError(NotationError):
    """An idset string or id list does not follow RFC 22 (ascending, unique, decimal ids)."""

    notation = "rfc22-idset"


class IdsetSyntaxError(IdsetError):
    """An idset string breaks RFC 22's grammar itself (a stray character, a dangling ',' or
    '-', an unbalanced bracket), as opposed to well-formed ids that break its rules."""


@dataclass(frozen=True)
class IdSet:
    """An immutable set of ids stored as sorted, disjoint, non-adjacent ``(lo, hi)`` runs."""

    runs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        previous_hi = -2
        for lo, hi in self.runs:
            if not (0 <= lo <= hi <= IDSET_MAX_ID) or lo <= previous_hi + 1:
                raise IdsetError(
                    f"runs {self.runs!r} are not sorted, disjoint and within 0..{IDSET_MAX_ID}",
                    expected="normalised runs (use IdSet.from_ids or IdSet.from_runs)",
                )
            previous_hi = hi

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_runs(cls, runs: Iterable[tuple[int, int]]) -> IdSet:
        """Normalise arbitrary (possibly overlapping, unordered) inclusive runs into a set."""
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(runs):
            _check_id(lo)
            _check_id(hi)
            if hi < lo:
                raise IdsetError(f"run {lo}-{hi} is descending", expected="lo <= hi")
            if merged and lo <= merged[-1][1] + 1:
                if hi > merged[-1][1]:
                    merged[-1] = (merged[-1][0], hi)
            else:
                merged.append((lo, hi))
        return cls(tuple(merged))

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> IdSet:
        """The set of the given ids (any order, duplicates ignored)."""
        return cls.from_runs((i, i) for i in ids)

    # -- set protocol -------------------------------------------------------------------

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.runs)

    def __bool__(self) -> bool:
        return bool(self.runs)

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.runs:
            yield from range(lo, hi + 1)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, int) or isinstance(item, bool):
            return False
        index = bisect.bisect_right(self.runs, (item, IDSET_MAX_ID + 1)) - 1
        return index >= 0 and self.runs[index][0] <= item <= self.runs[index][1]

    def __or__(self, other: IdSet) -> IdSet:
        return self.union(other)

    def __and__(self, other: IdSet) -> IdSet:
        return self.intersection(other)

    def __sub__(self, other: IdSet) -> IdSet:
        return self.difference(other)

    def union(self, *others: IdSet) -> IdSet:
        """Ids in this set or any of the others."""
        runs = list(self.runs)
        for other in others:
            runs.extend(other.runs)
        return IdSet.from_runs(runs)

    def intersection(self, *others: IdSet) -> IdSet:
        """Ids in this set and in every one of the others."""
        result = self
        for other in others:
            result = IdSet(_intersect_runs(result.runs, other.runs))
        return result

    def difference(self, *others: IdSet) -> IdSet:
        """Ids in this set and in none of the others."""
        result = self
        for other in others:
            result = IdSet(_subtract_runs(result.runs, other.runs))
        return result

    def issubset(self, other: IdSet) -> bool:
        """True when every id of this set is in ``other``."""
        return not self.difference(other)

    @property
    def first(self) -> int | None:
        """Smallest id, or None for the empty set."""
        return self.runs[0][0] if self.runs else None

    @property
    def last(self) -> int | None:
        """Largest id, or None for the empty set."""
        return self.runs[-1][1] if self.runs else None

    # -- encoding -----------------------------------------------------------------------

    def encode(self, *, ranged: bool = True, brackets: bool = False) -> str:
        """The RFC 22 string, in the styles of flux-core's ``idset_encode`` flags.

        ``ranged`` writes every run of two or more ids as ``lo-hi`` (``5-6``, not ``5,6``);
        otherwise each id is listed. ``brackets`` wraps the result in ``[...]`` only when the
        set holds more than one id, so ``2`` stays ``2`` and the empty set is ``""``.
        """
        if ranged:
            body = ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.runs)
        else:
            if len(self) > PLAIN_ENCODE_MAX_IDS:
                raise IdsetError(
                    f"refusing to list {len(self)} ids one by one",
                    expected=f"at most {PLAIN_ENCODE_MAX_IDS} ids, or the ranged encoding",
                )
            body = ",".join(str(i) for i in self)
        if brackets and len(self) > 1:
            return f"[{body}]"
        return body

    def __str__(self) -> str:
        return self.encode()


def _check_id(value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise IdsetError(f"id {value!r} is not an integer", expected="a non-negative integer")
    if not 0 <= value <= IDSET_MAX_ID:
        raise IdsetError(f"id {value} is out of range", expected=f"0..{IDSET_MAX_ID}")


def _intersect_runs(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _subtract_runs(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    j = 0
    for lo, hi in a:
        current = lo
        while j < len(b) and b[j][1] < current:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > current:
                out.append((current, b[k][0] - 1))
            current = max(current, b[k][1] + 1)
            k += 1
        if current <= hi:
            out.append((current, hi))
    return tuple(out)


def parse_idset(text: str) -> IdSet:
    """Parse a strict RFC 22 idset string; ``""`` and ``"[]"`` are the empty set."""
    if not isinstance(text, str):
        raise IdsetError(f"expected a string, found {type(text).__name__}", expected="a string")
    body, offset = text, 0
    if text.startswith("[") or text.endswith("]"):
        if not (text.startswith("[") and text.endswith("]") and len(text) >= 2):
            where = 0 if not text.startswith("[") else len(text)
            raise IdsetSyntaxError(
                f"unbalanced bracket in {text!r}",
                text=text,
                position=where,
                expected="one pair of brackets around the whole idset, or none",
            )
        body, offset = text[1:-1], 1
    runs: list[tuple[int, int]] = []
    if body == "":
        return IdSet()
    pos = 0
    previous_hi = -1
    while True:
        match = _ELEMENT.match(body, pos)
        if match is None:
            raise _element_error(text, body, pos, offset)
        where = offset + pos
        for index in (1, 2):
            digits = match.group(index)
            if digits is not None and len(digits) > 1 and digits.startswith("0"):
                raise IdsetError(
                    f"id {digits!r} has leading zeros",
                    text=text,
                    position=offset + match.start(index),
                    expected="decimal ids without leading zeros",
                )
            if digits is not None and len(digits) > len(str(IDSET_MAX_ID)):
                raise IdsetError(
                    f"id {digits[:16]!r}... is too large",
                    text=text,
                    position=offset + match.start(index),
                    expected=f"ids no larger than {IDSET_MAX_ID}",
                )
        lo = int(match.group(1))
        hi = lo if match.group(2) is None else int(match.group(2))
        for value in (lo, hi):
            if value > IDSET_MAX_ID:
                raise IdsetError(
                    f"id {value} is too large",
                    text=text,
                    position=where,
                    expected=f"ids no larger than {IDSET_MAX_ID}",
                )
        if match.group(2) is not None and hi <= lo:
            raise IdsetError(
                f"range {match.group(0)!r} does not ascend",
                text=text,
                position=where,
                expected=f"hi > lo (write a single id as {lo})" if hi == lo else "hi > lo",
            )
        if lo <= previous_hi:
            raise IdsetError(
                f"{match.group(0)!r} is not above the preceding id {previous_hi}",
                text=text,
                position=where,
                expected="unique ids in ascending order",
            )
        runs.append((lo, hi))
        previous_hi = hi
        pos = match.end()
        if pos == len(body):
            break
        if body[pos] != ",":
            raise _element_error(text, body, pos, offset)
        pos += 1
    return IdSet.from_runs(runs)


def _element_error(text: str, body: str, pos: int, offset: int) -> IdsetSyntaxError:
    """Describe what is wrong at ``body[pos]`` where an id, range or comma was expected."""
    where = offset + pos
    found = "end of input" if pos >= len(body) else repr(body[pos])
    return IdsetSyntaxError(
        f"unexpected {found} in idset {text!r}",
        text=text,
        position=where,
        expected="an id or lo-hi range, separated by ','",
    )


def encode_idset(ids: Iterable[int], *, ranged: bool = True, brackets: bool = False) -> str:
    """Encode any iterable of ids (order and duplicates do not matter) as an RFC 22 string."""
    return IdSet.from_ids(ids).encode(ranged=ranged, brackets=brackets)
