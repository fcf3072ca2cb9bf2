"""Paging and cells of app.cli.output, without a server."""

from __future__ import annotations

from typing import Any

from app.cli.output import MAX_PAGE, collect_pages, text


class FakeList:
    """A paged list of ``count`` items answering as the API does (limit, offset,
    next_offset), recording the requests."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.requests: list[tuple[int, int]] = []

    def __call__(self, limit: int, offset: int) -> dict[str, Any]:
        self.requests.append((limit, offset))
        items = [{"id": i} for i in range(offset, min(offset + limit, self.count))]
        following = offset + limit if offset + limit < self.count else None
        return {"items": items, "limit": limit, "offset": offset, "next_offset": following}


def test_one_request_returns_the_page_unchanged() -> None:
    fake = FakeList(3)
    assert collect_pages(fake, 50) == fake(50, 0)
    assert fake.requests[0] == (50, 0)


def test_long_lists_follow_next_offset_up_to_the_limit() -> None:
    fake = FakeList(1200)
    page = collect_pages(fake, 1100)
    assert fake.requests == [(MAX_PAGE, 0), (MAX_PAGE, 500), (100, 1000)]
    assert [item["id"] for item in page["items"]] == list(range(1100))
    assert page["limit"] == 1100 and page["offset"] == 0 and page["next_offset"] == 1100


def test_kept_items_count_towards_the_limit() -> None:
    fake = FakeList(30)
    page = collect_pages(fake, 4, keep=lambda item: item["id"] % 10 == 0)
    assert [item["id"] for item in page["items"]] == [0, 10, 20]
    assert page["next_offset"] is None


def test_cells() -> None:
    assert [text(None), text(""), text([]), text(True), text(["a", 1])] == [
        "-",
        "-",
        "-",
        "yes",
        "a, 1",
    ]
    assert text({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert text("two\n lines") == "two lines"
