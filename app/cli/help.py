"""Help texts: every command's examples, in the form click prints without rewrapping."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """An epilog listing example command lines (`\\b` keeps click from joining them)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
