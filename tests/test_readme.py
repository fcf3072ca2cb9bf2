"""The README's walk-through runs as written (issue 18): its shell blocks, in order, in one shell.

Every ```sh block of README.md carries a mode in its fence's info string:

- ```` ```sh walkthrough ````: runs, in order with the others, in one `bash -euo pipefail`
  against a live `jobmatch serve` on a fresh database (admin token `dev-admin-token`, as
  `make run` sets it);
- ```` ```sh walkthrough=once (reason) ````: runs in order with the others, but in the SQLite
  run of the walk-through only, for a block that never touches the server's database (the
  scenarios run on scratch databases of their own): the PostgreSQL run would repeat it;
- ```` ```sh walkthrough=postgresql ````: the PostgreSQL section, run on its own against a
  fresh PostgreSQL database when JOBMATCH_TEST_POSTGRES_URL is set;
- ```` ```sh walkthrough=skip (reason) ````: cannot run here (it serves forever, needs Docker
  or systemd, runs the whole suite); reported as a skipped test with its reason.

The walk-through takes the server's address from JOBMATCH_URL: its first line keeps the
value the reader set and otherwise sets `make run`'s default, http://127.0.0.1:8000. The test
sets JOBMATCH_URL to its own server, on another port, as a reader who ran `make run
PORT=...` does (issue 39: the address was written out in some 60 places, and `make run
PORT=...` changed none of them); the README's default appears nowhere else in the blocks.
The README speaks of the tools in `.venv/bin/`; the test replaces that with its own
interpreter's bin directory.

The pages of docs/ listed in :data:`WALKTHROUGH_PAGES` mark their examples the same way, and
each runs, on its own, against a fresh server of its own, its address in JOBMATCH_URL too
(issue 39: the worked examples of docs/choosing-a-notation.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.databases import BACKENDS, migrated_database, postgres_server_url, run_directory
from tests.live_server import LiveServer

REPOSITORY = Path(__file__).resolve().parent.parent
README = REPOSITORY / "README.md"
#: `make run`'s address, which the walk-through's first line sets when JOBMATCH_URL is unset.
README_ADDRESS = "127.0.0.1:8000"
README_URL_DEFAULT = 'export JOBMATCH_URL="${JOBMATCH_URL:-http://127.0.0.1:8000}"'
#: Pages of docs/ whose shell blocks run as the README's do, each against a fresh server.
WALKTHROUGH_PAGES = (REPOSITORY / "docs" / "choosing-a-notation.md",)
README_ADMIN_TOKEN = "dev-admin-token"
#: The PostgreSQL section's server and database, replaced by a fresh database of the test's.
README_CREATEDB = "createdb -h 127.0.0.1 -U postgres jobmatch"
README_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/jobmatch"
#: Bound on one run of the walk-through (it waits for the agent at most 90 s itself).
WALKTHROUGH_TIMEOUT = 300

FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
MODE = re.compile(r"walkthrough(?:=(?P<mode>skip|once|postgresql))?(?:\s+\((?P<reason>.+)\))?$")


@dataclass(frozen=True)
class Block:
    """One ```sh block of the README: where it starts, how the test treats it, its text."""

    line: int
    mode: str  # "run", "once", "skip" or "postgresql"
    reason: str
    body: str


def readme_blocks(document: Path = README) -> list[Block]:
    """The document's shell blocks in order; a shell block without a known mode is an error."""
    readme = document.read_text(encoding="utf-8")
    name = document.relative_to(REPOSITORY).as_posix()
    blocks = []
    for fence in FENCE.finditer(readme):
        language, _, rest = fence["info"].strip().partition(" ")
        if language not in ("sh", "bash", "shell", "console"):
            continue
        line = readme.count("\n", 0, fence.start()) + 1
        marker = MODE.fullmatch(rest.strip())
        if marker is None:
            raise AssertionError(
                f"{name} line {line}: a shell block needs 'walkthrough', "
                f"'walkthrough=once (reason)', 'walkthrough=postgresql' or "
                f"'walkthrough=skip (reason)' after '{language}'"
            )
        mode = marker["mode"] or "run"
        if mode in ("skip", "once") and not marker["reason"]:
            raise AssertionError(f"{name} line {line}: a {mode} block must say why")
        blocks.append(Block(line, mode, marker["reason"] or "", fence["body"]))
    return blocks


def script_of(blocks: list[Block], replacements: dict[str, str], name: str = "README.md") -> str:
    """One bash script running the blocks in order; a failure names its block (of the
    document ``name``)."""
    parts = [
        f"trap 'echo \"{name}: the block at line $README_LINE failed\" >&2' ERR",
    ]
    for block in blocks:
        body = block.body
        for old, new in replacements.items():
            body = body.replace(old, new)
        parts.append(f"README_LINE={block.line}\necho '>>> {name} line {block.line}'\n{body}")
    return "\n".join(parts) + "\n"


def run_script(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the script in its own process group, and end whatever it left running (the agent)."""
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=WALKTHROUGH_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(
            f"the walk-through took over {WALKTHROUGH_TIMEOUT} s:\n{output}"
        ) from expired
    finally:
        # The agent the debusine block starts in the background lives in this group too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(process.args, process.returncode, output)


def failure_report(blocks: list[Block], output: str, name: str = "README.md") -> str:
    """The failing block's text and what the script printed.

    The ERR trap names the block of a failing command; a shell that stops for another reason
    (an unset variable under -u) does not run the trap, so the last block started is named.
    """
    started = re.findall(rf"^>>> {re.escape(name)} line (\d+)$", output, re.MULTILINE)
    failed = re.search(r"the block at line (\d+) failed", output)
    line = int(failed[1]) if failed else int(started[-1]) if started else None
    shown = [b for b in blocks if b.line == line]
    block_text = shown[0].body if shown else "(unknown block)\n"
    return (
        f"{name}'s walk-through failed in the block at line {line}:\n{block_text}"
        f"--- output ---\n{output}"
    )


def scratch_directory(tmp_path: Path) -> Path:
    """A working directory that sees the repository's tests/ like the repository root does.

    The README runs from the repository's root; the test runs from a scratch directory so
    that what the walk-through writes (the demo's database) stays out of the checkout.
    """
    scratch = tmp_path / "work"
    scratch.mkdir()
    (scratch / "tests").symlink_to(REPOSITORY / "tests")
    return scratch


def walkthrough_env(tmp_path: Path, url: str | None = None) -> dict[str, str]:
    """The shell's environment: nothing of the developer's JOBMATCH_ settings leaks in;
    JOBMATCH_URL is ``url`` when given, as a reader exports it for a server on another port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBMATCH_")}
    env["TMPDIR"] = str(tmp_path)
    if url is not None:
        env["JOBMATCH_URL"] = url
    return env


def test_every_shell_block_has_a_mode() -> None:
    blocks = readme_blocks()
    assert [b for b in blocks if b.mode == "run"], "the README has no walk-through blocks"
    assert [b for b in blocks if b.mode == "postgresql"], "the PostgreSQL section is unmarked"


@pytest.mark.parametrize(
    "block",
    [b for b in readme_blocks() if b.mode == "skip"],
    ids=lambda block: f"line{block.line}",
)
def test_block_that_cannot_run_here(block: Block) -> None:
    pytest.skip(f"README.md line {block.line} is not run: {block.reason}")


@pytest.fixture(params=BACKENDS)
def readme_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    """`jobmatch serve` on a fresh, migrated database with the README's admin token."""
    if request.param == "postgresql" and postgres_server_url() is None:
        pytest.skip("PostgreSQL not configured (set JOBMATCH_TEST_POSTGRES_URL)")
    with migrated_database(request.param, tmp_path, run_directory(request.config)) as url:
        server = LiveServer(url, tmp_path / "server.log", admin_token=README_ADMIN_TOKEN)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def test_walkthrough_runs_as_written(readme_server: LiveServer, tmp_path: Path) -> None:
    on_sqlite = readme_server.database_url.startswith("sqlite")
    modes = ("run", "once") if on_sqlite else ("run",)
    blocks = [b for b in readme_blocks() if b.mode in modes]
    # The walk-through runs against a server that is not on make run's port, with only
    # JOBMATCH_URL saying where it is: every command must take the address from it.
    assert readme_server.port != 8000
    script = script_of(blocks, {".venv/bin/": f"{Path(sys.executable).parent}/"})
    assert script.count(README_ADDRESS) == 1, "only the first block may name make run's port"
    assert README_URL_DEFAULT in script
    env = walkthrough_env(tmp_path, url=readme_server.base_url)
    result = run_script(script, scratch_directory(tmp_path), env)
    assert result.returncode == 0, failure_report(blocks, result.stdout)
    # The script reached its last block, and what the README promises came true: the
    # agent ran the task job, and the scenarios all matched their expectations.
    assert f">>> README.md line {blocks[-1].line}" in result.stdout
    assert '"output": "42\\n"' in result.stdout
    # Issue 39: `/` answered a program with the index, its console link among them.
    assert '\n"/ui"\n' in result.stdout
    # Issue 35: after w1's agent reported its load values, what the admin set stays and is
    # what matching sees, and the MPI job's category still fits w1.
    assert re.search(r'"arch_seen_from":\s*\[\s*"load_values"\s*\]', result.stdout)
    assert re.search(r'"mpi_category_fits":\s*\[[^\]]*"w1"', result.stdout)
    if on_sqlite:
        differ = re.findall(r"^scenarios: \d+ matched, (\d+) differ", result.stdout, re.MULTILINE)
        assert differ and set(differ) == {"0"}


@pytest.fixture
def postgres_database_name() -> Iterator[str]:
    """A database name on the test server; dropped afterwards if the README created it."""
    server = postgres_server_url()
    if server is None:
        pytest.skip("PostgreSQL not configured (set JOBMATCH_TEST_POSTGRES_URL)")
    name = f"jobmatch_readme_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def test_postgresql_section_runs_as_written(postgres_database_name: str, tmp_path: Path) -> None:
    server = make_url(postgres_server_url() or "")
    blocks = [b for b in readme_blocks() if b.mode == "postgresql"]
    script = script_of(blocks, {".venv/bin/": f"{Path(sys.executable).parent}/"})
    assert README_CREATEDB in script and README_POSTGRES_URL in script
    createdb = (
        f"createdb -h {server.host or '127.0.0.1'} -p {server.port or 5432} "
        f"-U {server.username or 'postgres'} {postgres_database_name}"
    )
    fresh_url = server.set(database=postgres_database_name).render_as_string(False)
    script = script.replace(README_CREATEDB, createdb).replace(README_POSTGRES_URL, fresh_url)
    env = walkthrough_env(tmp_path)
    if server.password:
        env["PGPASSWORD"] = server.password
    result = run_script(script, tmp_path, env)
    assert result.returncode == 0, failure_report(blocks, result.stdout)
    assert "(at head)" in result.stdout


@pytest.mark.parametrize("failing", ["false", "false | true", "echo $UNDEFINED_IN_README"])
def test_a_failing_command_fails_the_walkthrough_and_names_its_block(
    failing: str, tmp_path: Path
) -> None:
    """The runner stops at the first failing command (-e, pipefail, -u) and names its block."""
    blocks = [Block(3, "run", "", "true\n"), Block(9, "run", "", f"{failing}\necho after\n")]
    result = run_script(script_of(blocks, {}), tmp_path, walkthrough_env(tmp_path))
    assert result.returncode != 0
    assert "after" not in result.stdout
    report = failure_report(blocks, result.stdout)
    assert "failed in the block at line 9:" in report and failing in report


@pytest.mark.parametrize("page", WALKTHROUGH_PAGES, ids=lambda page: page.name)
def test_docs_page_examples_run_as_written(
    page: Path, readme_server: LiveServer, tmp_path: Path
) -> None:
    """A page's examples, in order, in one shell, against a fresh server of their own; each
    example checks what the page says of it (`jq -e`), so a wrong claim fails here."""
    name = page.relative_to(REPOSITORY).as_posix()
    blocks = [b for b in readme_blocks(page) if b.mode == "run"]
    assert blocks, f"{name} has no walkthrough blocks"
    assert readme_server.port != 8000
    script = script_of(blocks, {".venv/bin/": f"{Path(sys.executable).parent}/"}, name)
    assert script.count(README_ADDRESS) == 1, "only the first block may name make run's port"
    env = walkthrough_env(tmp_path, url=readme_server.base_url)
    result = run_script(script, scratch_directory(tmp_path), env)
    assert result.returncode == 0, failure_report(blocks, result.stdout, name)
    assert f">>> {name} line {blocks[-1].line}" in result.stdout


@pytest.mark.parametrize("page", WALKTHROUGH_PAGES, ids=lambda page: page.name)
def test_docs_page_blocks_all_run(page: Path) -> None:
    """A page's examples run against its own fresh server: none is skipped, and none is
    for one database only (the README's PostgreSQL section sets one up of its own)."""
    modes = {b.mode for b in readme_blocks(page)}
    assert modes == {"run"}, f"{page.name}: blocks marked {sorted(modes - {'run'})}"
