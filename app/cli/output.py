"""Printing what the API answered: tables for people, the raw JSON for scripts.

Tables are rendered from the JSON the server sent (not from the client's models), so a
field a newer server adds can be shown without waiting for the models, and `-o json` and
the table always describe the same answer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: The server's largest page (LimitQuery in the API): longer lists take several requests.
MAX_PAGE = 500
#: What the API answers without ?limit=, so that `-o json` of a plain `list` equals it.
DEFAULT_LIMIT = 50
#: Width of tables written to a pipe or a file: wide enough that rows are not folded.
PIPE_WIDTH = 200

Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One column of a table: its header, how to read its cell from an item, and whether
    it appears only with `-o wide`."""

    header: str
    cell: Callable[[Row], Any]
    wide_only: bool = False


def field(name: str) -> Callable[[Row], Any]:
    """The cell reader of a top-level JSON field."""
    return lambda row: row.get(name)


def text(value: Any) -> str:
    """A JSON value as a table cell: '-' for nothing, lists joined, objects as JSON."""
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(text(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return " ".join(str(value).split())


def notations(request: Iterable[tuple[str, Any]]) -> str:
    """What a job or a category asks for, in its notations: `resources=...; hard=...`
    (fields that ask nothing are left out)."""
    parts = []
    for name, value in request:
        if value not in (None, "", []):
            shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            parts.append(f"{name}={' '.join(shown.split())}")
    return "; ".join(parts) or "(anything)"


def console() -> Console:
    """Standard output as a rich console; a pipe gets a fixed width and no colours."""
    if sys.stdout.isatty():
        return Console(highlight=False)
    width = int(os.environ.get("COLUMNS") or PIPE_WIDTH)
    return Console(highlight=False, width=max(width, 80), no_color=True, soft_wrap=True)


def print_json(data: Any) -> None:
    """The API's answer, as JSON on standard output."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_json_line(data: Any) -> None:
    """One answer as one line of JSON (JSON lines: a stream of answers, for `jq -c`)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def print_table(rows: Iterable[Row], columns: Sequence[Column], *, wide: bool) -> None:
    shown = [column for column in columns if wide or not column.wide_only]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold")
    for column in shown:
        table.add_column(column.header, overflow="fold")
    for row in rows:
        # Text, not str: a cell's words are not rich markup (``node/[core=8]`` stays).
        table.add_row(*(Text(text(column.cell(row))) for column in shown))
    console().print(table)


def print_fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """One `name: value` line per field, for the `show` commands."""
    items = list(pairs)
    width = max((len(name) for name, _ in items), default=0)
    out = console()
    for name, value in items:
        out.print(f"{name + ':':<{width + 1}} {text(value)}", markup=False)


def print_lines(lines: Iterable[str]) -> None:
    out = console()
    for line in lines:
        out.print(line, markup=False)


def collect_pages(
    fetch: Callable[[int, int], Any], limit: int, keep: Callable[[Row], bool] | None = None
) -> dict[str, Any]:
    """Up to ``limit`` items of a paged list, following ``next_offset``; with ``keep``,
    only the items it accepts count (and are shown).

    ``fetch(page_size, offset)`` returns one page as the server sent it. When one request
    suffices and nothing is left out, its page is returned unchanged (so `-o json` equals
    the API's answer); otherwise one page of the same shape holds every item kept.
    """

    def kept(page: Any) -> list[Row]:
        return [item for item in page.get("items", []) if keep is None or keep(item)]

    first = fetch(min(limit, MAX_PAGE), 0)
    items = kept(first)
    next_offset = first.get("next_offset")
    while next_offset is not None and len(items) < limit:
        following = fetch(min(limit - len(items), MAX_PAGE), next_offset)
        items += kept(following)
        next_offset = following.get("next_offset")
    if items == first.get("items", []):
        return dict(first)
    page = dict(first)
    page.update(items=items[:limit], limit=limit, next_offset=next_offset)
    return page


def more_hint(page: dict[str, Any]) -> str | None:
    """What to say under a table when the list goes on beyond --limit."""
    if page.get("next_offset") is None:
        return None
    return f"(more items follow: raise --limit beyond {len(page.get('items', []))} to see them)"
