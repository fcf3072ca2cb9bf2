"""RFC 29 hostlists: ordered lists of host names written as ``node[01-64,70],login1``.

A :class:`Hostlist` keeps the parsed runs (prefix, id range, zero-pad width, suffix), never the
expanded names, so counting, ``nth`` and ``find`` are O(number of runs) and iteration is lazy.
Encoding streams the names and keeps only the bracket group being built.

Zero padding (docs/notations/flux.md#rfc-29-hostlists). RFC 29 says the leading zeros of the
FIRST idlist element apply to every id (``[005,4,11-13]`` is 005,004,011,012,013); flux-core
instead pads each comma element by its own low bound (005,4,11,12,13). jobmatch follows the
RFC by default (``padding="rfc"``); an element with more zeros of its own keeps them
(``[1,01]`` is 1,01 in both readings). ``padding="flux-core"`` reproduces flux-core for
interoperability. The encoder emits text that parses back to the same names in the chosen
reading.

Strictness: one bracket group per expression (RFC 29); text after ``]`` containing ``[`` or
``]`` is an error, as are empty idlist elements, whitespace inside brackets and descending
ranges. Empty expressions (``a,,b``, leading or trailing commas) are empty lists per RFC 29;
space and tab separate expressions like ``,`` (flux-core behaviour recorded in the vectors).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from app.notations.errors import NotationError

Padding = Literal["rfc", "flux-core"]

#: flux-core refuses more than 2^20 hosts in one range (ERANGE); so do we.
MAX_RANGE_HOSTS = 1 << 20
#: Total names one hostlist may describe; keeps expansion, sort and encode bounded.
MAX_HOSTS = 1 << 22
#: Digits in one numeric id; longer ids are refused (no 10^4000 integers from hostile text).
MAX_ID_DIGITS = 18
#: Longest hostlist text accepted.
MAX_TEXT_LENGTH = 1 << 20

_SEPARATORS = ",\t "
_IDLIST_ELEMENT = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_TRAILING_DIGITS = re.compile(r"[0-9]+$")


class HostlistError(NotationError):
    """A hostlist string or host name does not follow RFC 29, or exceeds a stated limit."""

    notation = "rfc29-hostlist"


@dataclass(frozen=True)
class HostRun:
    """Names ``prefix + str(i).zfill(width) + suffix`` for ``i`` in ``lo..hi``.

    A literal name (no brackets) is a run with ``lo is None`` whose name is ``prefix``.
    """

    prefix: str
    lo: int | None = None
    hi: int = 0
    width: int = 0
    suffix: str = ""

    def __len__(self) -> int:
        return 1 if self.lo is None else self.hi - self.lo + 1

    def name(self, index: int) -> str:
        """The ``index``-th name of this run (0-based, caller checks bounds)."""
        if self.lo is None:
            return self.prefix
        return f"{self.prefix}{str(self.lo + index).zfill(self.width)}{self.suffix}"

    def __iter__(self) -> Iterator[str]:
        if self.lo is None:
            yield self.prefix
            return
        prefix, suffix, width = self.prefix, self.suffix, self.width
        for i in range(self.lo, self.hi + 1):
            yield f"{prefix}{str(i).zfill(width)}{suffix}"

    def find(self, host: str) -> int:
        """Index of ``host`` in this run, or -1; the zero-pad width must match exactly."""
        if self.lo is None:
            return 0 if host == self.prefix else -1
        core_len = len(host) - len(self.prefix) - len(self.suffix)
        if core_len <= 0 or not host.startswith(self.prefix) or not host.endswith(self.suffix):
            return -1
        digits = host[len(self.prefix) : len(self.prefix) + core_len]
        if not digits.isdigit() or not digits.isascii() or len(digits) > MAX_ID_DIGITS:
            return -1
        value = int(digits)
        if not self.lo <= value <= self.hi or str(value).zfill(self.width) != digits:
            return -1
        return value - self.lo


@dataclass(frozen=True, eq=False)
class Hostlist:
    """An immutable ordered list of host names (duplicates allowed), stored as runs.

    Two hostlists are equal when they list the same names in the same order, however the
    runs were written; ``str()`` is the canonical RFC 29 encoding.
    """

    runs: tuple[HostRun, ...] = ()
    _offsets: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        offsets = tuple(itertools.accumulate((len(run) for run in self.runs), initial=0))
        if offsets[-1] > MAX_HOSTS:
            raise HostlistError(
                f"hostlist describes {offsets[-1]} names", expected=f"at most {MAX_HOSTS}"
            )
        object.__setattr__(self, "_offsets", offsets)

    @classmethod
    def from_hosts(cls, hosts: Iterable[str]) -> Hostlist:
        """A hostlist holding exactly ``hosts`` in order (names are validated)."""
        checked = (_check_hostname(host) for host in hosts)
        return parse_hostlist(encode_hosts(checked))

    # -- sequence protocol ----------------------------------------------------------------

    def __len__(self) -> int:
        return self._offsets[-1]

    def __iter__(self) -> Iterator[str]:
        for run in self.runs:
            yield from run

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hostlist):
            return NotImplemented
        if len(self) != len(other):
            return False
        return all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(self.encode())

    def __getitem__(self, index: int) -> str:
        return self.nth(index)

    def __contains__(self, host: object) -> bool:
        return isinstance(host, str) and self.find(host) >= 0

    def nth(self, index: int) -> str:
        """The name at ``index`` (negative counts from the end), found without expanding."""
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError(f"hostlist index {index} out of range for {size} names")
        lo, hi = 0, len(self.runs) - 1
        while lo < hi:  # binary search on the run start offsets
            mid = (lo + hi + 1) // 2
            if self._offsets[mid] <= index:
                lo = mid
            else:
                hi = mid - 1
        return self.runs[lo].name(index - self._offsets[lo])

    def find(self, host: str) -> int:
        """Index of the first occurrence of ``host``, or -1 (flux-core ``hostlist_find``)."""
        for offset, run in zip(self._offsets, self.runs, strict=False):
            found = run.find(host)
            if found >= 0:
                return offset + found
        return -1

    def index(self, hosts: Iterable[str] | Hostlist) -> list[int]:
        """Positions of each of ``hosts`` in this list (-1 for a name not present)."""
        return [self.find(host) for host in hosts]

    def expand(self) -> list[str]:
        """All names, materialised (bounded by :data:`MAX_HOSTS`)."""
        return list(self)

    # -- derived lists ------------------------------------------------------------------

    def delete(self, hosts: Iterable[str] | Hostlist) -> tuple[int, Hostlist]:
        """Remove every occurrence of the given names; returns (names removed, new list)."""
        doomed = set(hosts)
        kept: list[str] = []
        removed = 0
        for name in self:
            if name in doomed:
                removed += 1
            else:
                kept.append(name)
        return removed, Hostlist.from_hosts(kept)

    def sorted(self) -> Hostlist:
        """Names sorted by prefix, then by numeric suffix (flux-core ``hostlist_sort``)."""
        return Hostlist.from_hosts(sorted(self, key=_sort_key))

    def uniq(self) -> Hostlist:
        """Sorted names with duplicates dropped (flux-core ``hostlist_uniq``)."""
        unique = sorted(set(self), key=_sort_key)
        return Hostlist.from_hosts(unique)

    def encode(self, padding: Padding = "rfc") -> str:
        """The compressed RFC 29 text; parsing it with the same ``padding`` gives this list."""
        encoder = _Encoder(padding)
        for run in self.runs:
            if (
                run.lo is not None
                and not run.suffix
                and not run.prefix[-1:].isdigit()
                and len(str(run.hi)) <= MAX_ID_DIGITS
            ):
                encoder.add_run(run.prefix, run.lo, run.hi, run.width)
            else:
                for name in run:
                    encoder.add_name(name)
        return encoder.finish()

    def __str__(self) -> str:
        return self.encode()


def _check_hostname(host: str) -> str:
    if not isinstance(host, str) or not host:
        raise HostlistError(f"host name {host!r} is empty or not a string", expected="a name")
    for position, char in enumerate(host):
        if not _is_name_char(char):
            raise HostlistError(
                f"invalid character {char!r} in host name {host!r}",
                text=host,
                position=position,
                expected="printable ASCII other than whitespace, '[', ']' and ','",
            )
    return host


def _is_name_char(char: str) -> bool:
    return "!" <= char <= "~" and char not in "[],"


def _split_number(name: str) -> tuple[str, int, int] | None:
    """(prefix, number, pad width) of a name's trailing digits, or None if uncompressible."""
    match = _TRAILING_DIGITS.search(name)
    if match is None or len(match.group(0)) > MAX_ID_DIGITS:
        return None
    digits = match.group(0)
    value = int(digits)
    return name[: match.start()], value, _pad_width(digits)


def _pad_width(digits: str) -> int:
    """Zero-pad width written by ``digits``: its length if it has leading zeros, else 0."""
    return len(digits) if len(digits) > 1 and digits[0] == "0" else 0


def _same_rendering(value: int, width_a: int, width_b: int) -> bool:
    """Whether ``value`` (and every larger value) prints the same zero-filled to either width."""
    return width_a == width_b or max(width_a, width_b) <= len(str(value))


def _sort_key(name: str) -> tuple[str, int, int, int]:
    split = _split_number(name)
    if split is None:
        return (name, 0, 0, 0)
    prefix, value, width = split
    return (prefix, 1, width, value)


class _Encoder:
    """Streaming compressor: consecutive names sharing a prefix share one bracket group."""

    def __init__(self, padding: Padding) -> None:
        self.padding = padding
        self.out: list[str] = []
        self.prefix: str | None = None
        self.group: list[list[int]] = []  # [lo, hi, width] per element of the current group

    def add_name(self, name: str) -> None:
        split = _split_number(name)
        if split is None:
            self._flush()
            self.out.append(name)
        else:
            prefix, value, width = split
            self.add_run(prefix, value, value, width)

    def add_run(self, prefix: str, lo: int, hi: int, width: int) -> None:
        if width <= len(str(lo)):
            width = 0  # zero-filling to no more than the natural width changes nothing
        if self.prefix == prefix and self.group:
            last = self.group[-1]
            if last[1] + 1 == lo and _same_rendering(lo, last[2], width):
                last[1] = hi
                return
            if self._fits_group(lo, width):
                self.group.append([lo, hi, width])
                return
        self._flush()
        self.prefix = prefix
        self.group = [[lo, hi, width]]

    def _fits_group(self, lo: int, width: int) -> bool:
        if self.padding == "flux-core":
            return True
        first_width = self.group[0][2]
        return _same_rendering(lo, first_width, width) or _same_rendering(
            lo, max(first_width, width), width
        )

    def _flush(self) -> None:
        if self.prefix is None:
            return
        first_width = self.group[0][2]
        parts: list[str] = []
        for position, (lo, hi, width) in enumerate(self.group):
            shown = width
            if self.padding == "rfc" and position > 0 and _same_rendering(lo, first_width, width):
                shown = 0  # the first element's zeros already apply (RFC 29)
            text = str(lo).zfill(shown)
            if hi != lo:
                text += "-" + str(hi).zfill(shown)
            parts.append(text)
        single = len(self.group) == 1 and self.group[0][0] == self.group[0][1]
        self.out.append(self.prefix + (parts[0] if single else "[" + ",".join(parts) + "]"))
        self.prefix = None
        self.group = []

    def finish(self) -> str:
        self._flush()
        return ",".join(self.out)


def parse_hostlist(text: str, *, padding: Padding = "rfc") -> Hostlist:
    """Parse RFC 29 text into a :class:`Hostlist` (nothing is expanded)."""
    if not isinstance(text, str):
        raise HostlistError(f"expected a string, found {type(text).__name__}", expected="text")
    if len(text) > MAX_TEXT_LENGTH:
        raise HostlistError(
            f"hostlist text is {len(text)} characters long",
            expected=f"at most {MAX_TEXT_LENGTH}",
        )
    runs: list[HostRun] = []
    total = 0
    pos = 0
    length = len(text)
    while pos < length:
        if text[pos] in _SEPARATORS:
            pos += 1
            continue
        start = pos
        while pos < length and text[pos] not in _SEPARATORS and text[pos] != "[":
            _check_char(text, pos, "host name prefix")
            pos += 1
        prefix = text[start:pos]
        if pos < length and text[pos] == "[":
            close = text.find("]", pos)
            if close < 0:
                raise HostlistError(
                    f"'[' at {pos} is never closed",
                    text=text,
                    position=pos,
                    expected="']' ending the idlist",
                )
            elements = _parse_idlist(text, pos + 1, close, padding)
            pos = close + 1
            suffix_start = pos
            while pos < length and text[pos] not in _SEPARATORS:
                _check_char(text, pos, "host name suffix")
                pos += 1
            suffix = text[suffix_start:pos]
            for lo, hi, width in elements:
                total += hi - lo + 1
                _check_total(total, text, start)
                runs.append(HostRun(prefix, lo, hi, width, suffix))
        else:
            total += 1
            _check_total(total, text, start)
            runs.append(HostRun(prefix))
    return Hostlist(tuple(runs))


def _check_char(text: str, pos: int, where: str) -> None:
    char = text[pos]
    if char == "[":
        raise HostlistError(
            f"second '[' in one expression at position {pos}",
            text=text,
            position=pos,
            expected="one bracketed idlist per hostlist expression (RFC 29)",
        )
    if not _is_name_char(char):
        raise HostlistError(
            f"invalid character {char!r} in {where}",
            text=text,
            position=pos,
            expected="printable ASCII other than whitespace, '[', ']' and ','",
        )


def _check_total(total: int, text: str, position: int) -> None:
    if total > MAX_HOSTS:
        raise HostlistError(
            f"hostlist expands to more than {MAX_HOSTS} names",
            text=text,
            position=position,
            expected=f"at most {MAX_HOSTS} names",
        )


def _parse_idlist(text: str, start: int, end: int, padding: Padding) -> list[tuple[int, int, int]]:
    """Elements ``(lo, hi, width)`` of the idlist ``text[start:end]``, widths resolved."""
    if start == end:
        raise HostlistError(
            "empty idlist '[]'", text=text, position=start, expected="ids such as [0-3,7]"
        )
    elements: list[tuple[int, int, int]] = []
    first_width = 0
    pos = start
    while True:
        match = _IDLIST_ELEMENT.match(text, pos, end)
        if match is None:
            found = "',' with nothing before it" if text[pos : pos + 1] in ",]" else None
            found = found or repr(text[pos])
            raise HostlistError(
                f"unexpected {found} in idlist",
                text=text,
                position=pos,
                expected="a non-negative id or lo-hi range",
            )
        lo_text, hi_text = match.group(1), match.group(2)
        for digits in (lo_text, hi_text):
            if digits is not None and len(digits) > MAX_ID_DIGITS:
                raise HostlistError(
                    f"id {digits[:24]!r}... has {len(digits)} digits",
                    text=text,
                    position=pos,
                    expected=f"at most {MAX_ID_DIGITS} digits",
                )
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise HostlistError(
                f"range {match.group(0)!r} descends",
                text=text,
                position=pos,
                expected="lo <= hi",
            )
        if hi - lo + 1 > MAX_RANGE_HOSTS:
            raise HostlistError(
                f"range {match.group(0)!r} holds {hi - lo + 1} ids",
                text=text,
                position=pos,
                expected=f"at most {MAX_RANGE_HOSTS} ids in one range",
            )
        own_width = _pad_width(lo_text)
        if not elements:
            first_width = own_width
        width = own_width if padding == "flux-core" else max(first_width, own_width)
        elements.append((lo, hi, width))
        pos = match.end()
        if pos == end:
            return elements
        if text[pos] != ",":
            raise HostlistError(
                f"unexpected {text[pos]!r} in idlist",
                text=text,
                position=pos,
                expected="',' or ']'",
            )
        pos += 1
        if pos == end:
            raise HostlistError(
                "idlist ends with ','",
                text=text,
                position=pos,
                expected="an id after ','",
            )


def encode_hosts(hosts: Iterable[str], *, padding: Padding = "rfc") -> str:
    """Compress names, in order and without sorting, into RFC 29 text (flux-core's rules)."""
    encoder = _Encoder(padding)
    for host in hosts:
        encoder.add_name(_check_hostname(host))
    return encoder.finish()


def expand_hostlist(text: str, *, padding: Padding = "rfc") -> list[str]:
    """All names of an RFC 29 string, in order."""
    return parse_hostlist(text, padding=padding).expand()


def iter_hostlist(text: str, *, padding: Padding = "rfc") -> Iterator[str]:
    """Names of an RFC 29 string, produced lazily."""
    return iter(parse_hostlist(text, padding=padding))


def count_hostlist(text: str) -> int:
    """Number of names an RFC 29 string describes, computed without expanding it."""
    return len(parse_hostlist(text))


def nth_host(text: str, index: int, *, padding: Padding = "rfc") -> str:
    """The ``index``-th name of an RFC 29 string, computed without expanding it."""
    return parse_hostlist(text, padding=padding).nth(index)


def compress_hostlist(text: str, *, padding: Padding = "rfc") -> str:
    """Re-encode an RFC 29 string in canonical compressed form."""
    return parse_hostlist(text, padding=padding).encode(padding)


def name_parts(name: str) -> Iterator[tuple[str, int, int, int, str]]:
    """Every way to read ``name`` as ``prefix + digits + suffix`` with ``digits`` a
    non-empty run of ASCII digits (at most MAX_ID_DIGITS): ``(prefix, number, len(digits),
    natural length of number, suffix)``. A name belongs to a run ``prefix[lo-hi]suffix`` of
    pad width ``w`` exactly when one part has that prefix and suffix, ``lo <= number <= hi``
    and ``len(digits) == max(w, natural length)`` (see :meth:`HostRun.find`)."""
    length = len(name)
    start = 0
    while start < length:
        if not ("0" <= name[start] <= "9"):
            start += 1
            continue
        end = start
        while end < length and "0" <= name[end] <= "9":
            end += 1
        for i in range(start, end):
            for j in range(i + 1, min(end, i + MAX_ID_DIGITS) + 1):
                digits = name[i:j]
                number = int(digits)
                yield name[:i], number, j - i, len(str(number)), name[j:]
        start = end
