"""Reading the files commands are given, where `-` stands for standard input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from app.cli.errors import CommandError, ExitCode


def read_file_or_stdin(path: str | Path) -> str:
    """The text of ``path`` (UTF-8), or all of standard input when it is `-`; raises what
    reading raises (OSError, UnicodeDecodeError), for the command to word."""
    if str(path) == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def read_json_object(path: Path, expected: str) -> dict[str, Any]:
    """The JSON object of ``path`` (`-`: standard input), written as JSON or as YAML (a
    superset of JSON, so one reader takes both); anything else is a CommandError (exit 2)
    whose line names the file and ``expected`` (what the object holds)."""
    try:
        body = yaml.safe_load(read_file_or_stdin(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise CommandError(f"{path}: {' '.join(str(error).split())}", ExitCode.USAGE) from None
    if not isinstance(body, dict):
        raise CommandError(f"{path}: expected a JSON or YAML object ({expected})", ExitCode.USAGE)
    # YAML reads dates and times as objects; the API takes JSON values only.
    try:
        json.dumps(body)
    except (TypeError, ValueError) as error:
        raise CommandError(f"{path}: not a JSON value: {error}", ExitCode.USAGE) from None
    return body
