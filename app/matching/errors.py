"""What the matching services refuse, independent of HTTP (app/api maps these to statuses)."""

from __future__ import annotations

from app.notations.errors import NotationError


class MatchingError(Exception):
    """Base of every refusal by the matching services."""


class NotFoundError(MatchingError):
    """The named worker, job or token does not exist."""


class ConflictError(MatchingError):
    """The request contradicts the current state (e.g. finishing a job that is not running)."""


class WorkerExistsError(ConflictError):
    """A registration named a worker that exists and did not say it replaces it (Grid
    Engine's ``qconf -ae`` refuses an existing host the same way); ``worker`` is its name."""

    def __init__(self, worker: str) -> None:
        super().__init__(
            f"worker {worker!r} already exists; to replace it whole, send the registration "
            f"again with ?replace=true (its token keeps working); to change some of its "
            f"fields only, PATCH /v1/workers/{worker}"
        )
        self.worker = worker


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
