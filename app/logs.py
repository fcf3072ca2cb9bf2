"""Logging of the server and the worker agent: one JSON object per line (or plain text for
a person at a terminal), with the current request id on every line.

The JSON comes from python-json-logger: the standard fields renamed to ``time``, ``level``,
``logger`` and ``message``, and whatever a log call passes in ``extra`` (a domain event's
fields, the access log's status and caller) as fields of their own. Standard library and
that package only: the agent, which imports no server code, configures its logging here
too.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

#: The id of the HTTP request being served (X-Request-ID), or "-" outside a request.
request_id: ContextVar[str] = ContextVar("request_id", default="-")

#: The fields every JSON line starts with, by the names they are written under.
_JSON_FIELDS = ("asctime", "levelname", "name", "message")
_RENAMED = {"asctime": "time", "levelname": "level", "name": "logger"}

#: Loggers whose INFO lines say nothing an operator needs: Alembic announces its context
#: ("Context impl PostgresqlImpl", "Will assume transactional DDL") each time /readyz
#: compares the schema with the migrations.
_QUIET_LOGGERS = ("alembic",)


class RequestIdFilter(logging.Filter):
    """Stamps each record with the id of the request being served."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class DropColorMessage(logging.Filter):
    """Removes uvicorn's ``color_message``, a copy of the message with ANSI colour escapes
    that would otherwise become a field of every uvicorn line."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.__dict__.pop("color_message", None)
        return True


#: A record's own attributes; anything else on a record came in a log call's ``extra``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "color_message",
}

_TEXT_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"


def _text_value(value: object) -> str:
    """A field's value as a person reads it in a key=value pair: bare when it is one word,
    else quoted as JSON (so that a value with a space or a quote stays one pair)."""
    text = value if isinstance(value, str) else None
    if text is None:
        if isinstance(value, (dict, list, tuple)):
            return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
        text = str(value)
    if text and not any(c.isspace() or c in '"=' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """One line per record for a person: time, level, request id, logger and message,
    then the fields the log call passed in ``extra`` (a domain event's job and worker, the
    access log's caller and duration) as ``key=value``, as the JSON lines carry them.

    A field whose value the message already says (the event's name, the access line's
    method, path and status) is not repeated.
    """

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        said = {word.strip("()[]{},:;'\"") for word in record.getMessage().split()}
        pairs = [
            f"{name}={_text_value(value)}"
            for name, value in record.__dict__.items()
            if name not in _RECORD_ATTRIBUTES
            and not name.startswith("_")
            and value is not None
            and str(value) not in said
        ]
        return " ".join([line, *pairs])


def json_formatter() -> logging.Formatter:
    """A formatter of one JSON object per line, its time in ISO 8601 UTC."""
    formatter = JsonFormatter(
        list(_JSON_FIELDS),
        rename_fields=_RENAMED,
        json_ensure_ascii=False,
        json_default=str,
    )
    formatter.converter = time.gmtime
    formatter.default_time_format = "%Y-%m-%dT%H:%M:%S"
    formatter.default_msec_format = "%s.%03dZ"
    return formatter


def configure_logging(level: str, fmt: str) -> None:
    """Send every log record of the process to stderr in ``fmt`` (``json`` or ``text``),
    from ``level`` up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.addFilter(DropColorMessage())
    if fmt == "json":
        handler.setFormatter(json_formatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    # uvicorn's access log repeats what our middleware logs, with less context.
    logging.getLogger("uvicorn.access").disabled = True
