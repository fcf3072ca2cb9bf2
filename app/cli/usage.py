"""Click's usage errors (a missing argument, a bad value, an unknown option...) as one
`error:` line, the form every other failure of `jobmatch` takes (docs/cli.md).

Click prints three lines: the usage (with Typer's `{ID}` placeholders), a hint and the
error; Typer words a bad value the way pydantic does ("Input should be a valid integer,
unable to parse string as an integer"). Here the error is said once, in plain words, with
the command's --help named at its end.
"""

from __future__ import annotations

import re
from typing import Any

# Typer vendors its own copy of click: these are the exceptions it raises (only
# BadParameter is re-exported by typer itself).
from typer._click.exceptions import (
    BadParameter,
    MissingParameter,
    NoSuchOption,
    UsageError,
)

#: pydantic's error types (the `type` of an error of the ValidationError Typer chains to
#: its BadParameter) and what they mean to someone typing a command.
EXPECTED = {
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "bool_parsing": "true or false",
    "path_type": "a path",
}
#: pydantic's bound errors: the bound's key in the error's `ctx`, and how to say it.
BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def usage_message(error: UsageError) -> str:
    """The one line (without `error: `) that says what is wrong with the command line."""
    if isinstance(error, MissingParameter):
        message = f"missing {_kind(error.param)} {_name(error.param)}"
        choices = _choices(error.param)
        if choices:
            message += f" (one of: {', '.join(choices)})"
    elif isinstance(error, BadParameter):
        message = f"invalid value for {_name(error.param, error.param_hint)}: {_reason(error)}"
    elif isinstance(error, NoSuchOption):
        message = f"no such option: {error.option_name}"
        if error.possibilities:
            message += f" (did you mean {' or '.join(sorted(error.possibilities))}?)"
    else:
        message = _lowered(error.format_message())
    message = " ".join(message.split())
    if error.ctx is not None:
        message += f" (see '{error.ctx.command_path} --help')"
    return message


def _kind(param: Any) -> str:
    return "option" if getattr(param, "param_type_name", "") == "option" else "argument"


def _name(param: Any, hint: Any = None) -> str:
    """An option by its flags (`--state`), an argument by its metavar (`ID`, `ROLE`)."""
    if hint is not None:
        return hint if isinstance(hint, str) else "/".join(hint)
    if param is None:
        return "a parameter"
    if _kind(param) == "option" and param.opts:
        return "/".join(param.opts)
    return str(param.metavar or param.name or "").strip("{}[]<>.").upper()


def _choices(param: Any) -> list[str]:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or not descriptor.is_choice or not descriptor.choices:
        return []
    return [str(getattr(choice, "value", choice)) for choice in descriptor.choices]


def _reason(error: BadParameter) -> str:
    """What was wrong with the value: from pydantic's first error when Typer chained one
    (its input and type), else click's own words (`0 is not in the range x>=1`)."""
    errors = getattr(error.__cause__, "errors", None)
    details = errors() if callable(errors) else []
    if details:
        first = details[0]
        expected = EXPECTED.get(first.get("type", ""))
        if expected is not None:
            return f"{first.get('input')!r} is not {expected}"
        if first.get("type") in BOUNDS:
            key, words = BOUNDS[first["type"]]
            return f"{first.get('input')} is out of range (expected {words} {first['ctx'][key]})"
        return _lowered(str(first.get("msg", error.message)))
    return _lowered(error.message)


def _lowered(message: str) -> str:
    """click's and pydantic's sentences as the rest of a line: "Value error, " dropped,
    the first letter small (unless a name starts with it), no final full stop."""
    message = re.sub(r"^Value error, ", "", message.strip())
    if message[:1].isupper() and not message[1:2].isupper():
        message = message[0].lower() + message[1:]
    return message.rstrip(".")
