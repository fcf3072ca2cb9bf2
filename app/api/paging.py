"""Paged listings: the ``limit`` and ``offset`` query parameters every listing takes, and
the one-row look-ahead that tells whether another page follows.

Each listing fetches one row more than the page holds: when that row exists, the page is
not the last one and ``next_offset`` names the next; the extra row is never shown. The
rule lives here once instead of in every listing route.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Protocol, TypeVar

from fastapi import Depends

from app.api.schemas.common import LimitQuery, OffsetQuery, Page

T = TypeVar("T")
Row = TypeVar("Row")
Row_co = TypeVar("Row_co", covariant=True)


class Fetch(Protocol[Row_co]):
    """Reads up to ``limit`` rows of a listing from ``offset``, in the listing's order."""

    def __call__(self, *, limit: int, offset: int) -> Sequence[Row_co]: ...


@dataclass(frozen=True)
class Paging:
    """The page a listing request asks for."""

    limit: int
    offset: int

    @property
    def look_ahead(self) -> int:
        """How many rows to fetch: the page and one more, to learn whether more exist."""
        return self.limit + 1

    def page(self, items: list[T]) -> Page[T]:
        """The page of ``items``, fetched ``look_ahead`` at a time from ``offset``."""
        more = len(items) > self.limit
        return Page[T](
            items=items[: self.limit],
            limit=self.limit,
            offset=self.offset,
            next_offset=self.offset + self.limit if more else None,
        )

    def listing(self, fetch: Fetch[Row], show: Callable[[Row], T]) -> Page[T]:
        """The page of a listing: ``fetch`` reads its rows with the look-ahead, ``show``
        turns each shown row into its body."""
        rows = fetch(limit=self.look_ahead, offset=self.offset)
        return self.page([show(row) for row in rows])


def paging_by(default_limit: int) -> Callable[[int, int], Paging]:
    """The dependency that reads a page's query parameters, ``limit`` defaulting to
    ``default_limit``."""

    def paging(limit: LimitQuery = default_limit, offset: OffsetQuery = 0) -> Paging:
        return Paging(limit=limit, offset=offset)

    return paging


#: A page of a listing that may grow long (jobs, workers, categories, tokens).
Paging50Dep = Annotated[Paging, Depends(paging_by(50))]
#: A page of an administrator's table that stays short (attributes, PEs, task types).
Paging100Dep = Annotated[Paging, Depends(paging_by(100))]
