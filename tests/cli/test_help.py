"""The program's help (issue 21): an example for every command, defaults shown, no `<bool>`
labels, the exit codes documented, shell completion and --version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from app import __version__
from app.cli import cli
from app.cli.main import LOCAL_COMMANDS, REMOTE_COMMANDS
from tests.cli.conftest import run_jobmatch

runner = CliRunner()


def leaf_commands(command: Any = None, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command that runs something, as its words after `jobmatch`."""
    command = command or typer.main.get_command(cli)
    if not hasattr(command, "commands"):
        return [path]
    found = []
    for name, sub in command.commands.items():
        found += leaf_commands(sub, (*path, name))
    return found


COMMANDS = leaf_commands()


def test_the_command_tree_holds_the_remote_and_local_commands() -> None:
    expected = {
        ("workers", "list"),
        ("workers", "show"),
        ("workers", "drain"),
        ("workers", "resume"),
        ("workers", "delete"),
        ("jobs", "list"),
        ("jobs", "show"),
        ("jobs", "explain"),
        ("jobs", "submit"),
        ("jobs", "cancel"),
        ("categories", "list"),
        ("categories", "show"),
        ("values", "show"),
        ("tasks", "list"),
        ("attributes", "list"),
        ("quotas", "list"),
        ("quotas", "show"),
        ("quotas", "add"),
        ("quotas", "replace"),
        ("quotas", "delete"),
        ("hostgroups", "list"),
        ("hostgroups", "show"),
        ("hostgroups", "add"),
        ("hostgroups", "replace"),
        ("hostgroups", "delete"),
        ("acls", "list"),
        ("acls", "show"),
        ("acls", "add"),
        ("acls", "replace"),
        ("acls", "delete"),
        ("projects", "list"),
        ("projects", "show"),
        ("projects", "add"),
        ("projects", "delete"),
        ("serve",),
        ("demo",),
        ("db", "upgrade"),
        ("db", "downgrade"),
        ("db", "current"),
        ("db", "check"),
        ("scenario", "run"),
        ("whatif",),
    }
    assert expected <= set(COMMANDS)


def test_the_program_help_sorts_every_command_into_remote_or_local() -> None:
    """The program's description names which commands need a server and which a database;
    a command added later must land in one of the lists (quotas was once missing)."""
    top = {words[0] for words in COMMANDS}
    assert top == {*REMOTE_COMMANDS, *LOCAL_COMMANDS, "shape", "requires", "worker"}
    shown = " ".join(runner.invoke(cli, ["--help"]).output.split())
    assert f"Remote commands ({', '.join(REMOTE_COMMANDS)})" in shown
    assert f"Local commands ({', '.join(LOCAL_COMMANDS)})" in shown


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_every_command_has_an_example_and_no_bool_label(words: tuple[str, ...]) -> None:
    result = runner.invoke(cli, [*words, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    examples = result.output.split("Examples:\n", 1)
    assert len(examples) == 2, f"jobmatch {' '.join(words)} --help has no example"
    assert examples[1].lstrip().startswith(f"jobmatch {' '.join(words)}") or (
        f"jobmatch {' '.join(words)}" in examples[1]
    )
    assert "<bool>" not in result.output


def test_remote_options_show_their_defaults_and_variables() -> None:
    result = runner.invoke(cli, ["workers", "list", "--help"], env={"COLUMNS": "120"})
    text = " ".join(result.output.split())
    assert "[env var: JOBMATCH_URL; default: http://127.0.0.1:8000]" in text
    assert "[env var: JOBMATCH_TOKEN]" in text
    assert "-o, --output <table|wide|json>" in text and "[default: table]" in text
    assert "[default: 50; x>=1]" in text


def test_the_program_help_documents_the_exit_codes() -> None:
    result = runner.invoke(cli, ["--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for line in (
        "0  ok",
        "1  the API refused the request",
        "2  usage error",
        "3  cannot reach the server",
        "4  the token was refused",
        "5  the server failed",
    ):
        assert line in result.output
    assert "--install-completion" in result.output and "--show-completion" in result.output


def test_version_from_the_console_script() -> None:
    script = Path(sys.executable).parent / "jobmatch"
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert result.stdout == f"jobmatch {__version__}\n"


def test_shell_completion_completes_the_commands() -> None:
    """Click's completion protocol, as the script --install-completion writes calls it."""
    result = run_jobmatch(
        env={"_JOBMATCH_COMPLETE": "complete_bash", "COMP_WORDS": "jobmatch wor", "COMP_CWORD": "1"}
    )
    assert result.code == 0, result.stderr
    assert set(result.stdout.split()) >= {"workers", "worker"}
    # --show-completion takes no shell name: typer finds the shell among the program's
    # parents. Run from bash, as a user types it; the `; exit` keeps bash from replacing
    # itself with the program (a make recipe's sh or a test runner would be found first).
    script = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m app.cli --show-completion; exit $?"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert script.returncode == 0, script.stderr
    assert "_JOBMATCH_COMPLETE=complete_bash" in script.stdout
