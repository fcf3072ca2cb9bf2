"""Every usage error of every command is one `error:` line on stderr and exit 2 (issue 39):
no usage block, no `{ID}` placeholder, no pydantic wording. The commands are found by
walking the program's click tree, so a command added later is covered without a new test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main

from app.cli.errors import ExitCode
from app.cli.main import cli, main
from app.settings import get_settings
from tests.cli.conftest import Run, run_jobmatch

#: Nothing listens there: a command that got past its usage checks would say so (exit 3).
NOWHERE = {"JOBMATCH_URL": "http://127.0.0.1:1"}
#: Words of the forms this test replaces: click's usage block, pydantic's sentences.
NOT_WANTED = ("Usage:", "Try '", "Error:", "Input should", "Value error", "{", "}", "\t")


def leaves() -> Iterator[tuple[list[str], object]]:
    """(the words that name a command, its click command), for every command."""

    def walk(command: object, path: list[str]) -> Iterator[tuple[list[str], object]]:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, command

    yield from walk(typer.main.get_command(cli), [])


def usage_errors() -> Iterator[list[str]]:
    """Command lines that are wrong before any request: an unknown option for every
    command, a missing argument for every command that needs one, and a bad value for
    every command with a number or a choice to give."""
    for path, command in leaves():
        yield [*path, "--no-such-option"]
        params = getattr(command, "params", [])
        required = [p for p in params if p.param_type_name == "argument" and p.required]
        if required:
            yield path
        for param in params:
            descriptor = param.type_descriptor
            number = descriptor.annotation in (int, float)
            checked = descriptor.is_choice or number
            if not checked or getattr(param, "is_flag", False):
                continue
            if param.param_type_name == "option":
                yield [*path, param.opts[0], "not-a-value"]
            elif param is params[0]:
                yield [*path, "not-a-value"]


def assert_one_error_line(args: list[str], result: Run) -> None:
    assert result.code == ExitCode.USAGE, (args, result)
    assert result.stdout == "", (args, result)
    assert result.stderr.startswith("error: "), (args, result)
    assert result.stderr.count("\n") == 1, (args, result)
    for words in NOT_WANTED:
        assert words not in result.stderr, (args, words, result.stderr)


def run_main(args: list[str], capsys: pytest.CaptureFixture[str], database_url: str) -> Run:
    """The program's entry point, `main()`, with ``args`` as its command line, in this
    process: the walk below makes some 150 command lines, each of which costs a second of
    a loaded machine as a child process. The words of each kind of error are checked in
    child processes too (test_the_words_of_a_usage_error)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["jobmatch", *args])
        for name in [name for name in os.environ if name.startswith("JOBMATCH_")]:
            patch.delenv(name)
        patch.setenv("JOBMATCH_URL", NOWHERE["JOBMATCH_URL"])
        # `db downgrade` takes an unknown option as its revision (it may be -1): Alembic
        # refuses it, after opening the database, which must not be ./jobmatch.db.
        patch.setenv("JOBMATCH_DATABASE_URL", database_url)
        # The settings are read once per process: another test may have read them.
        get_settings.cache_clear()
        try:
            with pytest.raises(SystemExit) as exited:
                main()
        finally:
            get_settings.cache_clear()
    captured = capsys.readouterr()
    code = exited.value.code
    return Run(code if isinstance(code, int) else 1, captured.out, captured.err)


def test_every_usage_error_of_every_command_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    database_url = f"sqlite:///{tmp_path / 'jobmatch.db'}"
    cases = list(usage_errors())
    # Each command once at least, the new `jobs` commands of issue 39 among them.
    named = {" ".join(args[:2]) for args in cases}
    assert {"jobs output", "jobs history", "jobs show", "worker --no-such-option"} <= named
    assert len(cases) > 100
    for args in cases:
        assert_one_error_line(args, run_main(args, capsys, database_url))


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["jobs", "show"], "error: missing argument ID (see 'jobmatch jobs show --help')"),
        (
            ["jobs", "show", "abc"],
            "error: invalid value for ID: 'abc' is not a whole number "
            "(see 'jobmatch jobs show --help')",
        ),
        (
            ["jobs", "show", "0"],
            "error: invalid value for ID: 0 is out of range (expected at least 1) "
            "(see 'jobmatch jobs show --help')",
        ),
        (
            ["jobs", "list", "--state", "sleeping"],
            "error: invalid value for --state: 'sleeping' is not one of 'waiting', 'running', "
            "'finished', 'failed', 'cancelled' (see 'jobmatch jobs list --help')",
        ),
        (
            ["jobs", "list", "--stat", "x"],
            "error: no such option: --stat (did you mean --state?) "
            "(see 'jobmatch jobs list --help')",
        ),
        (
            ["tokens", "create"],
            "error: missing argument ROLE (one of: worker, submitter) "
            "(see 'jobmatch tokens create --help')",
        ),
        (
            ["workers", "drain", "w1"],
            "error: missing option --reason (see 'jobmatch workers drain --help')",
        ),
        (["no-such-command"], "error: no such command 'no-such-command' (see 'jobmatch --help')"),
        (
            ["worker", "--slots", "0"],
            "error: argument --slots: must be 1 or more, not 0 (see 'jobmatch worker --help')",
        ),
    ],
)
def test_the_words_of_a_usage_error(args: list[str], line: str) -> None:
    result = run_jobmatch(*args, env=NOWHERE)
    assert (result.code, result.stdout, result.stderr) == (ExitCode.USAGE, "", line + "\n")


def test_a_group_alone_still_prints_its_help() -> None:
    result = run_jobmatch("jobs", env=NOWHERE)
    assert result.code == ExitCode.USAGE
    assert "Commands:" in result.stderr + result.stdout
