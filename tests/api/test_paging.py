"""The listing routes' page rule, on its own: fetch one row more than the page holds; that
row, when it exists, says another page follows and is never shown."""

from __future__ import annotations

import inspect

from app.api.paging import Paging, paging_by


def test_look_ahead_fetches_one_row_more_than_the_page() -> None:
    assert Paging(limit=50, offset=100).look_ahead == 51


def test_a_full_fetch_means_another_page_and_drops_the_extra_row() -> None:
    page = Paging(limit=2, offset=4).page(["e", "f", "g"])
    assert (page.items, page.limit, page.offset, page.next_offset) == (["e", "f"], 2, 4, 6)


def test_a_short_fetch_is_the_last_page() -> None:
    assert Paging(limit=2, offset=4).page(["e", "f"]).next_offset is None
    assert Paging(limit=2, offset=0).page([]).items == []


def test_a_listing_fetches_with_the_look_ahead_and_shows_each_row() -> None:
    asked: list[tuple[int, int]] = []

    def fetch(*, limit: int, offset: int) -> list[int]:
        asked.append((limit, offset))
        return [5, 6, 7]

    page = Paging(limit=2, offset=4).listing(fetch, str)
    assert asked == [(3, 4)]
    assert (page.items, page.next_offset) == (["5", "6"], 6)


def test_each_dependency_keeps_its_default_page_size() -> None:
    for default in (50, 100):
        parameters = inspect.signature(paging_by(default)).parameters
        assert parameters["limit"].default == default
        assert parameters["offset"].default == 0
        assert paging_by(default)(limit=7, offset=3) == Paging(limit=7, offset=3)
