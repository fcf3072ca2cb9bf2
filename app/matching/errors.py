"""What the matching services refuse, independent of HTTP (app/api maps these to statuses)."""

from __future__ import annotations

from app.notations.errors import NotationError


class MatchingError(Exception):
    """Base of every refusal by the matching services."""


class NotFoundError(MatchingError):
    """The named worker, job or token does not exist."""


class ConflictError(MatchingError):
    """The request contradicts the current state (e.g. finishing a job that is not running)."""


class ForbiddenError(MatchingError):
    """The caller is authenticated but the resource is not theirs (another worker's job)."""


class InvalidFieldError(MatchingError):
    """A field of a request is invalid: its notation did not parse, or it breaks a rule.

    ``field`` is the request field's name, ``location`` where it was (``body`` or
    ``header``); ``error`` the notation error when there is one.
    """

    def __init__(
        self,
        field: str,
        message: str,
        error: NotationError | None = None,
        *,
        location: str = "body",
    ) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.error = error
        self.location = location
