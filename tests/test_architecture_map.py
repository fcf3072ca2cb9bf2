"""The house a newcomer reads is the house there is (issue 20).

docs/architecture.md draws the tree of ``app/`` in its "Layout" section, one entry per
package with the modules it holds. A module added without a line there leaves a newcomer
with a map that is wrong where it matters, so these tests hold the two together:

* every module of ``app/`` is named in the part of the map that belongs to its package;
* every module the map names in a package exists there;
* every package says in its docstring what it holds, so ``help()`` and an editor tell as
  much as the map does;
* every Python file the docs name in backticks exists, so a renamed module leaves no
  stale name in docs/ or the README.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Where an entry of the map starts: its name stands within the first columns; what stands
#: further right continues the entry above.
ENTRY_COLUMNS = 20
#: Module files that are no module of their own: a package's body and its ``-m`` entry.
NOT_ON_THE_MAP = frozenset({"__init__.py", "__main__.py"})
#: A Python file named in backticks in a document: ``app/db/engine.py``, ``allocation/r.py``.
DOC_FILE = re.compile(r"`([A-Za-z0-9_/.]+\.py)`")
#: Files of upstream projects the docs cite as sources, not files of this repository.
UPSTREAM_FILES = frozenset(
    {
        "debusine/server/scheduler.py",  # debusine's scheduler (docs/scenarios.md)
        "momotor/shared/resources/item.py",  # Momotor's resource items (docs/scenarios.md)
    }
)
#: A module name as the map writes it: ``name.py`` or a bare ``name`` of a list. Any word of
#: the package's part counts, so a module whose name is also a word of its prose could slip
#: through; the map's entries name modules as ``name.py`` or in lists, which keeps that rare.
MODULE_WORD = re.compile(r"\b([a-z_][a-z0-9_]*)(?:\.py)?\b")


def _layout_block() -> list[str]:
    """The lines of the fenced block under the "## Layout" heading."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1].splitlines()[1:]


def _package_sections() -> dict[str, str]:
    """Each package of the map (``app``, ``app/matching``, ``app/matching/dispatch``...) and
    the text of its part: its own entry and every entry nested below it."""
    lines = _layout_block()
    sections: dict[str, list[str]] = {"app": lines}
    open_packages: list[tuple[int, str]] = []
    for line in lines:
        indent = len(line) - len(line.lstrip())
        name = line.split()[0] if line.strip() else ""
        starts_entry = line.strip() != "" and indent < ENTRY_COLUMNS
        if starts_entry:
            open_packages = [(i, p) for i, p in open_packages if i < indent]
            if name.endswith("/") and name != "app/":
                parent = open_packages[-1][1] if open_packages else "app"
                package = f"{parent}/{name.rstrip('/')}"
                open_packages.append((indent, package))
                sections[package] = []
        for _, package in open_packages:
            sections[package].append(line)
    return {package: "\n".join(text) for package, text in sections.items()}


def _packages() -> list[Path]:
    return sorted(path.parent for path in APP.rglob("__init__.py"))


def _modules(package: Path) -> list[str]:
    return sorted(path.stem for path in package.glob("*.py") if path.name not in NOT_ON_THE_MAP)


def test_every_module_is_on_the_map_of_its_package() -> None:
    sections = _package_sections()
    missing: list[str] = []
    for package in _packages():
        key = package.relative_to(ROOT).as_posix()
        if key not in sections:
            missing.append(f"{key}/ (the package itself)")
            continue
        named = {match.group(1) for match in MODULE_WORD.finditer(sections[key])}
        missing.extend(f"{key}/{module}.py" for module in _modules(package) if module not in named)
    assert not missing, "docs/architecture.md's Layout does not name: " + ", ".join(missing)


def test_every_module_the_map_names_exists() -> None:
    """A ``name.py`` in a package's own entry lines (not its sub-packages') is a file of
    that package: a renamed or removed module leaves no stale name behind."""
    sections = _package_sections()
    stale: list[str] = []
    for package, text in sections.items():
        nested = [other for other in sections if other.startswith(package + "/")]
        own = text
        for other in nested:
            own = own.replace(sections[other], "")
        # A name after a slash is a path into another package (``gridengine/scenarios.py``).
        for match in re.finditer(r"(?<![/\w])([a-z_][a-z0-9_]*)\.py\b", own):
            if not (ROOT / package / f"{match.group(1)}.py").exists():
                stale.append(f"{package}/{match.group(1)}.py")
    assert not stale, "docs/architecture.md's Layout names files that do not exist: " + ", ".join(
        sorted(set(stale))
    )


def test_every_package_says_what_it_holds() -> None:
    silent = [
        package.relative_to(ROOT).as_posix()
        for package in _packages()
        if not ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    ]
    assert not silent, "packages without a docstring: " + ", ".join(silent)


def _repository_python_files() -> list[str]:
    return [
        path.relative_to(ROOT).as_posix()
        for top in ("app", "tests", "bench", "migrations", "conformance")
        for path in (ROOT / top).rglob("*.py")
    ]


def test_every_python_file_the_docs_name_exists() -> None:
    """A name may be a full path or the tail of one (``allocation/r.py`` stands for
    ``app/matching/allocation/r.py``); a name starting with ``_`` is a suffix convention
    (``_pg.py``), not a file."""
    files = _repository_python_files()
    stale: list[str] = []
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for name in sorted(set(DOC_FILE.findall(document.read_text(encoding="utf-8")))):
            if name.startswith("_") or name in UPSTREAM_FILES:
                continue
            if not any(file == name or file.endswith("/" + name) for file in files):
                stale.append(f"{document.relative_to(ROOT).as_posix()}: {name}")
    assert not stale, "documents name Python files that do not exist: " + "; ".join(stale)
