"""Every link between the project's documents leads somewhere (issue 39).

A newcomer follows the links of README.md and docs/: from the glossary to the page that
says more, from one section to another. A renamed page or heading leaves a link that goes
nowhere, which no reader reports and no other test notices. This test reads every relative
link of README.md and of every page under docs/ (outside code blocks and code spans) and
checks that its file exists and, for a link with a ``#fragment``, that the target has a
heading with that anchor, as GitHub makes anchors of headings.

It also holds the index to the pages: every page under docs/ is linked from docs/README.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOCUMENTS = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

#: A fenced code block (``` or ~~~), whose text is code, not links.
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
#: An inline code span.
CODE_SPAN = re.compile(r"`[^`\n]*`")
#: An inline link or image: [text](target) or [text](target "title").
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
#: An ATX heading.
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
#: Targets that leave the repository: checked by nobody here.
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _prose(text: str) -> str:
    """The text without code blocks and code spans, line numbers kept."""
    text = FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    return CODE_SPAN.sub("", text)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (word characters,
    spaces and hyphens stay), each space a hyphen. Markdown links in a heading count by
    their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(document: Path) -> set[str]:
    """Every anchor of the document's headings; a repeated heading's later anchors get
    ``-1``, ``-2``... as on GitHub."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    for match in HEADING.finditer(text):
        anchor = github_anchor(match.group(1))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    """The links of ``document`` that lead nowhere, each with its line (relative to
    ``root``) and why."""
    text = _prose(document.read_text(encoding="utf-8"))
    broken: list[str] = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if EXTERNAL.match(target):
            continue
        line = text.count("\n", 0, match.start()) + 1
        path_part, _, fragment = target.partition("#")
        destination = (document.parent / unquote(path_part)).resolve() if path_part else document
        where = f"{document.relative_to(root).as_posix()}:{line}: ({target})"
        if not destination.exists():
            broken.append(f"{where} no such file")
            continue
        anchored = fragment and destination.suffix == ".md"
        if anchored and unquote(fragment) not in anchors_of(destination):
            broken.append(f"{where} no heading with the anchor #{fragment}")
    return broken


@pytest.mark.parametrize(
    "document", DOCUMENTS, ids=lambda document: document.relative_to(ROOT).as_posix()
)
def test_every_link_leads_somewhere(document: Path) -> None:
    broken = broken_links(document)
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_every_page_is_in_the_index() -> None:
    index = DOCS / "README.md"
    linked = {
        (index.parent / match.group(1).partition("#")[0]).resolve()
        for match in LINK.finditer(_prose(index.read_text(encoding="utf-8")))
        if not EXTERNAL.match(match.group(1))
    }
    missing = [
        page.relative_to(DOCS).as_posix()
        for page in sorted(DOCS.rglob("*.md"))
        if page != index and page.resolve() not in linked
    ]
    assert not missing, "docs/README.md does not link: " + ", ".join(missing)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Worker states and liveness", "worker-states-and-liveness"),
        ("Array jobs (`-t`, `-tc`)", "array-jobs--t--tc"),
        ("Allocation on inventories (Fluxion-like)", "allocation-on-inventories-fluxion-like"),
        ("One pull, from HTTP to SQL and back", "one-pull-from-http-to-sql-and-back"),
        ("Requests (`-l`)", "requests--l"),
        ("dispatch, pull", "dispatch-pull"),
    ],
)
def test_anchors_are_made_as_github_makes_them(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """The checker is not blind: a missing file and a missing heading are both reported,
    and links in code are not links."""
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n", encoding="utf-8")
    page.write_text(
        "# Page\n\n[ok](other.md#a-section) [self](#page) `[code](gone.md)`\n"
        "[gone](gone.md)\n[no heading](other.md#nothing)\n"
        "```\n[in a block](gone.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == [
        "page.md:4: (gone.md) no such file",
        "page.md:5: (other.md#nothing) no heading with the anchor #nothing",
    ]
