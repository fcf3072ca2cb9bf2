"""The project stands on its own: nothing in it reads or cites a path outside the repository.

Issue 18: a fresh clone failed at collection because tests read test data from a folder
beside the checkout, and docstrings sent readers to notes that only exist in our workshop.
This test walks every tree a user receives and fails, naming file and line, on

* a relative path that climbs out to the workshop shelf (its ``shared`` folder, its
  ``vectors`` and its ``research`` notes),
* the workshop's research notes and seed documents, by path, by file name or by number,
* an absolute path under a machine's home, work or mount directories.

Well-known system paths stay allowed through :data:`ALLOWED`, each with its reason. The
forbidden words are assembled from pieces below, so this file passes its own scan.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Folders and files a user of the project receives; the ones not present yet are skipped.
SCANNED_DIRS = ("app", "tests", "bench", "migrations", "docs", ".ci", "deploy")
SCANNED_FILES = ("README.md", "Makefile", "Dockerfile", "alembic.ini", "pyproject.toml")
#: Generated or cached content, never written by hand.
SKIPPED_DIRS = frozenset({"__pycache__", ".hypothesis", ".pytest_cache", ".mypy_cache"})

_SHELF = "sha" + "red"
_NOTES = "rese" + "arch"

#: (pattern, what it is): text that points outside the repository.
LEAKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\.\./" + _SHELF + r"\b"), "a path to the workshop shelf"),
    (
        re.compile(r"[\"']\.\.[\"']\s*[/,]\s*[\"']" + _SHELF + r"[\"']"),
        "a path to the workshop shelf",
    ),
    (re.compile(r"\b" + _SHELF + r"/(vectors|seeds|DESIGN\.md)"), "a path into the shelf"),
    (re.compile(r"\b" + _NOTES + r"/[\w.-]+\.md\b"), "a research note of the workshop"),
    (re.compile(r"\b(sge|peers|house|style)\.md\b"), "a research note of the workshop"),
    (
        re.compile(r"\b(flux|sge|momotor|peers)-" + _NOTES + r"\b"),
        "a research note of the workshop",
    ),
    (re.compile(r"\b00\d_[0-9a-f]{16}\b"), "a seed document's file name"),
    (re.compile(r"\b[Ss]eeds? 00\d\b"), "a seed document cited by its number"),
)

#: Top-level directories of a file system; an absolute path starting with one of them is a
#: path on some machine. API routes ("/jobs/1", "/workers/pull") start with none of them.
_ROOTS = (
    "bin|boot|dev|etc|home|lib|lib64|media|mnt|nix|opt|private|proc|root|run|sbin"
    "|snap|srv|sys|tmp|Users|usr|var|work|workspace"
)
ABSOLUTE = re.compile(r"(?<![\w.~:/$@{}-])/(?:" + _ROOTS + r")(?![\w.-])(?:/[\w.*+@-]*)*")


@dataclass(frozen=True)
class Allowed:
    """An absolute path prefix that may appear, where, and why."""

    prefix: str
    reason: str

    def covers(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix + "/")


ALLOWED: tuple[Allowed, ...] = (
    Allowed("/usr", "installed programs and the env shebang (/usr/bin/env, /usr/bin/chromium)"),
    Allowed("/bin", "the system shell and standard tools"),
    Allowed("/etc", "system configuration, e.g. the PostgreSQL clusters CI starts"),
    Allowed("/dev", "device files such as /dev/null"),
    Allowed("/proc", "the kernel's process and load figures the benchmarks read"),
    Allowed("/sys", "the kernel's device and CPU figures"),
    Allowed("/tmp", "the system's scratch directory, used as an example value or a default"),
    Allowed("/var", "system state directories a deployment writes to"),
    Allowed("/run", "runtime files and the secrets a container engine mounts"),
    Allowed("/opt", "add-on software, e.g. the virtual environment inside the image"),
    Allowed("/srv", "a deployment's data directory (FHS), e.g. in a systemd unit example"),
)


@dataclass(frozen=True)
class Finding:
    """One line of one file that points outside the repository."""

    relative: str
    line: int
    what: str
    text: str

    def __str__(self) -> str:
        return f"{self.relative}:{self.line}: {self.what}: {self.text.strip()[:120]}"


def scanned_files(root: Path) -> Iterator[Path]:
    """Every hand-written file of the trees a user receives, in a stable order."""
    for name in SCANNED_FILES:
        if (root / name).is_file():
            yield root / name
    for name in SCANNED_DIRS:
        base = root / name
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(root).parts):
                yield path


def findings_in(relative: str, text: str) -> Iterator[Finding]:
    """The leaks and the absolute paths not on the allow-list, line by line."""
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern, what in LEAKS:
            if pattern.search(line):
                yield Finding(relative, number, what, line)
        for match in ABSOLUTE.finditer(line):
            path = match.group(0)
            if not any(allowed.covers(path) for allowed in ALLOWED):
                yield Finding(
                    relative, number, f"an absolute path outside the repository ({path})", line
                )


def scan(root: Path) -> list[Finding]:
    """Findings over every scanned file under ``root``; binary files are skipped."""
    found: list[Finding] = []
    for path in scanned_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found.extend(findings_in(path.relative_to(root).as_posix(), text))
    return found


def test_the_repository_points_nowhere_outside_itself() -> None:
    findings = scan(ROOT)
    assert not findings, "paths outside the repository:\n" + "\n".join(map(str, findings))


def test_the_scan_reads_the_trees_and_this_file() -> None:
    """The scan is not vacuous: it reads the test data, the code and itself."""
    relatives = {path.relative_to(ROOT).as_posix() for path in scanned_files(ROOT)}
    assert "tests/test_self_contained.py" in relatives
    assert "tests/vectors/flux/shape.jsonl" in relatives
    assert "app/main.py" in relatives or any(r.startswith("app/") for r in relatives)


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ('VECTORS = ROOT / ".." / "' + _SHELF + '" / "vectors"', None),
        (
            "data = Path('../" + _SHELF + "/vectors/flux/idset.jsonl')",
            "a path to the workshop shelf",
        ),
        ("see " + _NOTES + "/flux.md section 5", "a research note of the workshop"),
        ('"""Seed text: 001_' + '831d147218e7e70e.txt."""', "a seed document's file name"),
        ('path = "/' + "work/" + _SHELF + '/vectors/sge/values.jsonl"', "a path into the shelf"),
        ('home = "/' + 'home/alice/jobmatch.db"', "an absolute path outside the repository"),
        ("cd /" + "root/clone && make test", "an absolute path outside the repository"),
        ("(sge" + ".md section d)", "a research note of the workshop"),
        ("(flux-" + _NOTES + " section 5.4)", "a research note of the workshop"),
        ('"""Se' + 'ed 004: the allowlist wins."""', "a seed document cited by its number"),
        ("open('/" + "Users/bob/x')", "an absolute path outside the repository"),
        ("export DB=/" + "mnt/scratch/db.sqlite", "an absolute path outside the repository"),
    ],
)
def test_a_planted_leak_is_found(line: str, what: str | None) -> None:
    """Each kind of leak, planted in a file, is reported with its file and line."""
    found = list(findings_in("tests/planted.py", "ok = 1\n" + line + "\n"))
    assert found, f"{line!r} was not reported"
    assert all(f.line == 2 and f.relative == "tests/planted.py" for f in found)
    if what is not None:
        assert any(f.what.startswith(what) for f in found), [str(f) for f in found]


@pytest.mark.parametrize(
    "line",
    [
        "#!/usr/bin/env bash",
        'subprocess.run(["/usr/bin/chromium", "--headless"])',
        "stdout=open('/dev/null', 'w')",
        'Path("/proc/loadavg").read_text()',
        "ls /etc/postgresql",
        "tmp = Path('/tmp/jobmatch_bench_1')",
        'client.get("/workers/pull")',
        'client.post("/jobs/1/finish")',
        'url = "http://127.0.0.1:8000/homepage"',
        "see https://flux-framework.org/rfc/spec_46.html",
        "momotor.shared.resources and momotor-engine-shared 2.1.3",
        'name = "vertex.shared"',
        "ratio = cores/data",
        "git clone https://example.org/x && cd x/docs",
    ],
)
def test_allowed_text_is_not_reported(line: str) -> None:
    """System paths on the allow-list, API routes, URLs and the word "shared" pass."""
    assert list(findings_in("tests/planted.py", line)) == []
