"""Reading the files commands are given, where `-` stands for standard input."""

from __future__ import annotations

import sys
from pathlib import Path


def read_file_or_stdin(path: str | Path) -> str:
    """The text of ``path`` (UTF-8), or all of standard input when it is `-`; raises what
    reading raises (OSError, UnicodeDecodeError), for the command to word."""
    if str(path) == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")
