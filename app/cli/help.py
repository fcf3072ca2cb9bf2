"""Help texts: every command's examples, in the form click prints without rewrapping, and the
command groups that print them."""

from __future__ import annotations

import typer


def examples(*lines: str) -> str:
    """An epilog listing example command lines (`\\b` keeps click from joining them)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def command_group(help_text: str) -> typer.Typer:
    """A group of commands (`jobmatch workers ...`): bare, it prints its help; help is plain
    text, as click prints it (no rich markup, so `[default: ...]` stays as written)."""
    return typer.Typer(help=help_text, no_args_is_help=True, rich_markup_mode=None)
