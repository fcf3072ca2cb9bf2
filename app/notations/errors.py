"""The one error family every notation parser raises.

Each notation module subclasses :class:`NotationError` (itself a ``ValueError``, so callers
that only know Python's conventions still catch it). An error names the notation, the
0-based position in the input where it was detected, and what was expected there, so the
HTTP layer can turn any of them into a 422 problem+json body without knowing the notation.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TypedDict


class Where(TypedDict, total=False):
    """Where an error was found and what was expected there: the keywords a subclass with
    an ``__init__`` of its own passes on to :class:`NotationError` unchanged."""

    text: str | None
    position: int | None
    expected: str | None


class NotationError(ValueError):
    """Input text or object does not conform to a notation's grammar or rules."""

    #: Short name of the notation, e.g. "momotor-tags", "rfc22-idset"; set by subclasses.
    notation: str = "notation"

    def __init__(
        self,
        message: str,
        *,
        text: str | None = None,
        position: int | None = None,
        expected: str | None = None,
    ) -> None:
        self.message = message
        self.text = text
        self.position = position
        self.expected = expected
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [f"{self.notation}: {self.message}"]
        if self.position is not None:
            parts.append(f"at position {self.position}")
        if self.expected:
            parts.append(f"expected {self.expected}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description, used by the API's problem+json bodies."""
        return {
            "notation": self.notation,
            "message": self.message,
            "position": self.position,
            "expected": self.expected,
            "input": self.text,
        }


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A ", did you mean 'x'?" suffix naming the nearest valid name, or "" when none is near."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f", did you mean {close[0]!r}?" if close else ""
