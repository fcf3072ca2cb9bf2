"""Reading resource quota sets from their ``qconf`` text (``sge_resource_quota(5)``; the
format is described in app/notations/gridengine/quotas.py): every error is a
:class:`QuotaError` with the 0-based position of the fault.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from app.notations.gridengine.quotas import (
    FILTER_KINDS,
    Filter,
    FilterItem,
    Limit,
    QuotaError,
    QuotaRule,
    QuotaSet,
    Term,
)

__all__ = ["parse_quota_set", "parse_quota_sets"]


#: Object names as Grid Engine's key check allows them (no blanks, separators or the
#: characters of this notation: braces, commas, ``!``, ``@``, ``/``, ``=``).
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
#: A filter item: a name or an fnmatch pattern (``*``, ``?``, ``[...]``).
_ITEM = re.compile(r"[A-Za-z0-9_.\-*?\[\]^]{1,255}")
_MAX_TEXT = 1_000_000
_MAX_RULES = 1_000


@dataclass(frozen=True)
class _Line:
    start: int  # offset of the line's first character in the text
    body: str


def _lines(text: str) -> Iterator[_Line]:
    # A backslash before a newline joins the lines; two blanks keep every offset.
    joined = re.sub(r"\\\r?\n", lambda m: " " * len(m.group(0)), text)
    offset = 0
    for raw in joined.split("\n"):
        yield _Line(offset, raw.rstrip("\r"))
        offset += len(raw) + 1


def _fail(text: str, position: int, message: str, expected: str) -> QuotaError:
    return QuotaError(message, text=text, position=position, expected=expected)


def parse_quota_sets(text: str) -> list[QuotaSet]:
    """Every set of a ``qconf -Arqs`` file: sets between ``{`` and ``}``, or one set
    without braces. Raises :class:`QuotaError` with the 0-based position of the fault."""
    if len(text) > _MAX_TEXT:
        raise _fail(text, _MAX_TEXT, "the text is too long", f"at most {_MAX_TEXT} characters")
    blocks: list[list[_Line]] = []
    current: list[_Line] | None = None
    braced = False
    loose: list[_Line] = []
    for line in _lines(text):
        stripped = line.body.strip()
        if not stripped or stripped.startswith("#"):
            continue
        at = line.start + line.body.index(stripped[0])
        if stripped == "{":
            if current is not None:
                raise _fail(text, at, "'{' inside a set", "'}' ending the set before")
            if loose:
                raise _fail(text, at, "'{' after lines outside a set", "every set in braces")
            current, braced = [], True
            continue
        if stripped == "}":
            if current is None:
                raise _fail(text, at, "'}' without a set", "'{' before it")
            blocks.append(current)
            current = None
            continue
        if current is not None:
            current.append(line)
        elif braced:
            raise _fail(text, at, "text outside a set", "'{' starting the next set")
        else:
            loose.append(line)
    if current is not None:
        raise _fail(text, len(text), "the set is not closed", "'}'")
    if loose:
        blocks.append(loose)
    if not blocks:
        raise _fail(text, 0, "no resource quota set", "'{' and a set's name, enabled and limit")
    sets = [_parse_block(text, block) for block in blocks]
    seen: set[str] = set()
    for block, quota_set in zip(blocks, sets, strict=True):
        if quota_set.name in seen:
            raise _fail(
                text, block[0].start, f"set {quota_set.name!r} given twice", "unique set names"
            )
        seen.add(quota_set.name)
    return sets


def parse_quota_set(text: str) -> QuotaSet:
    """Exactly one set (``qconf -arqs``/``-mrqs`` edit one)."""
    sets = parse_quota_sets(text)
    if len(sets) != 1:
        raise _fail(text, 0, f"{len(sets)} sets given", "exactly one resource quota set")
    return sets[0]


def _parse_block(text: str, block: list[_Line]) -> QuotaSet:
    name: str | None = None
    description = "NONE"
    enabled = False
    rules: list[QuotaRule] = []
    rule_names: set[str] = set()
    seen: set[str] = set()
    for line in block:
        stripped = line.body.lstrip()
        at = line.start + len(line.body) - len(stripped)
        keyword, _, rest = stripped.partition(" ")
        if "\t" in keyword:
            keyword, _, tail = keyword.partition("\t")
            rest = tail + " " + rest
        value = rest.strip()
        value_at = at + len(stripped) - len(stripped[len(keyword) :].lstrip())
        if keyword in ("name", "description", "enabled") and keyword in seen:
            raise _fail(text, at, f"{keyword!r} given twice", f"one {keyword} line per set")
        seen.add(keyword)
        if keyword == "name":
            _check_name(text, "set", value, value_at)
            name = value
        elif keyword == "description":
            description = _description(text, value, value_at)
        elif keyword == "enabled":
            if value.lower() not in ("true", "false"):
                raise _fail(text, value_at, f"invalid enabled value {value!r}", "TRUE or FALSE")
            enabled = value.lower() == "true"
        elif keyword == "limit":
            if len(rules) >= _MAX_RULES:
                raise _fail(text, at, "too many rules", f"at most {_MAX_RULES} per set")
            rule, name_at = _parse_rule(text, value, value_at)
            if rule.name is not None and rule.name in rule_names:
                raise _fail(
                    text,
                    name_at,
                    f"rule name {rule.name!r} used twice in the set",
                    "rule names unique within a set",
                )
            rule_names.add(rule.name or "")
            rules.append(rule)
        else:
            raise _fail(
                text, at, f"unknown keyword {keyword!r}", "name, description, enabled or limit"
            )
    first = block[0].start
    if name is None:
        raise _fail(text, first, "the set has no name", "a 'name' line")
    if not rules:
        raise _fail(text, first, f"set {name!r} has no rule", "at least one 'limit' line")
    return QuotaSet(name, tuple(rules), description, enabled)


def _check_name(text: str, what: str, name: str, at: int) -> None:
    if not _NAME.fullmatch(name):
        raise _fail(
            text, at, f"invalid {what} name {name!r}", "a name of letters, digits, '_', '.', '-'"
        )


def _description(text: str, value: str, at: int) -> str:
    if not value:
        return "NONE"
    control = next((i for i, c in enumerate(value) if ord(c) < 32 and c != "\t"), None)
    if control is not None:
        # NUL and friends: PostgreSQL's text cannot hold NUL, and qconf prints one line.
        raise _fail(text, at + control, "a control character in the description", "printable text")
    if value.startswith('"'):
        if len(value) < 2 or not value.endswith('"'):
            raise _fail(text, at, "unterminated description", "a closing '\"'")
        value = value[1:-1]
        if '"' in value:
            raise _fail(text, at, "a '\"' inside the description", "a description without '\"'")
    return value or "NONE"


def _tokens(text: str, value: str, at: int) -> list[tuple[int, str]]:
    """Blank-separated words of a rule; a word that opens a brace runs to its ``}``."""
    found: list[tuple[int, str]] = []
    i = 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        start = i
        if value[i] == "{":
            end = value.find("}", i)
            if end < 0:
                raise _fail(text, at + i, "unclosed '{'", "'}' closing the expanded list")
            i = end + 1
            while i < len(value) and not value[i].isspace():
                i += 1
        else:
            while i < len(value) and not value[i].isspace():
                i += 1
        found.append((at + start, value[start:i]))
    return found


def _parse_rule(text: str, value: str, at: int) -> tuple[QuotaRule, int]:
    """A ``limit`` line's rule, and where its name was written (-1 without one)."""
    tokens = _tokens(text, value, at)
    fields: dict[str, Filter] = {}
    rule_name: str | None = None
    name_at = -1
    index = 0
    while index < len(tokens):
        position, word = tokens[index]
        if word == "to":
            break
        if word != "name" and word not in FILTER_KINDS:
            raise _fail(
                text,
                position,
                f"unknown rule keyword {word!r}",
                "name, users, projects, pes, queues, hosts or to",
            )
        if index + 1 >= len(tokens):
            raise _fail(
                text, position + len(word), f"{word!r} without a value", f"a value after {word!r}"
            )
        if word in fields or (word == "name" and rule_name is not None):
            raise _fail(text, position, f"{word!r} given twice", f"one {word!r} per rule")
        value_at, argument = tokens[index + 1]
        if word == "name":
            _check_name(text, "rule", argument, value_at)
            if argument.isdigit():
                raise _fail(
                    text,
                    value_at,
                    f"rule name {argument!r} is a number",
                    "a rule name that is not a number (rules are also named by position)",
                )
            rule_name, name_at = argument, value_at
        else:
            fields[word] = _parse_filter(text, word, argument, value_at)
        index += 2
    if index >= len(tokens):
        raise _fail(text, at + len(value), "the rule has no limits", "'to' and attr=value")
    to_at, _ = tokens[index]
    if index + 1 >= len(tokens):
        raise _fail(text, to_at + 2, "'to' without limits", "attr=value[,attr=value...]")
    limits_at, limits_text = tokens[index + 1]
    if index + 2 < len(tokens):
        extra_at, extra = tokens[index + 2]
        raise _fail(text, extra_at, f"{extra!r} after the limits", "the end of the rule")
    limits = _parse_limits(text, limits_text, limits_at)
    dynamic = [limit for limit in limits if limit.dynamic]
    hosts = fields.get("hosts")
    if dynamic and (hosts is None or not hosts.expand):
        raise _fail(
            text,
            limits_at,
            f"dynamic limit {dynamic[0].to_text()!r} in a rule that is not host-specific",
            "a rule with an expanded hosts filter, e.g. hosts {*}",
        )
    return QuotaRule(tuple(limits), rule_name, **fields), name_at


def _parse_filter(text: str, kind: str, argument: str, at: int) -> Filter:
    expand = argument.startswith("{")
    body, body_at = argument, at
    if expand:
        if not argument.endswith("}"):
            raise _fail(
                text,
                at + len(argument),
                f"text after the expanded {kind} list",
                "'}' ending the word",
            )
        body, body_at = argument[1:-1], at + 1
        if "{" in body:
            raise _fail(
                text,
                body_at + body.index("{"),
                "'{' inside an expanded list",
                "names, patterns, '!'",
            )
    elif "{" in argument or "}" in argument:
        mark = min(i for i in (argument.find("{"), argument.find("}")) if i >= 0)
        raise _fail(text, at + mark, "a brace inside a list", "'{' opening the whole list")
    items: list[FilterItem] = []
    offset = 0
    for part in body.split(","):
        item_at = body_at + offset
        offset += len(part) + 1
        part = part.strip()
        negated = part.startswith("!")
        pattern = part[1:] if negated else part
        if pattern.startswith("@"):
            if kind not in ("users", "hosts"):
                raise _fail(
                    text,
                    item_at,
                    f"{kind} item {part!r} names a group; only users (access lists) and "
                    "hosts (host groups) take '@' items",
                    f"{kind} names or patterns",
                )
            if not _ITEM.fullmatch(pattern[1:]):
                what = "access list" if kind == "users" else "host group"
                raise _fail(
                    text,
                    item_at,
                    f"invalid {kind} item {part!r}",
                    f"'@' and a {what} name or pattern",
                )
            items.append(FilterItem(pattern, negated))
            continue
        if not _ITEM.fullmatch(pattern):
            raise _fail(
                text,
                item_at,
                f"invalid {kind} item {part!r}",
                f"a {kind} name or pattern, '!' to exclude",
            )
        items.append(FilterItem(pattern, negated))
    return Filter(tuple(items), expand)


_DECIMAL = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?"
_TERM = re.compile(
    rf"\s*([+-])?\s*(?:\$([A-Za-z_][A-Za-z0-9_]*)(?:\*({_DECIMAL}))?|({_DECIMAL}))\s*"
)


def _parse_limits(text: str, limits_text: str, at: int) -> list[Limit]:
    limits: list[Limit] = []
    offset = 0
    for part in limits_text.split(","):
        part_at = at + offset
        offset += len(part) + 1
        attribute, equals, value = part.partition("=")
        if not equals or not attribute:
            raise _fail(text, part_at, f"limit {part!r} is not attr=value", "attr=value")
        if not value:
            raise _fail(
                text,
                part_at + len(attribute) + 1,
                f"limit {attribute!r} has no value",
                "a value after '='",
            )
        value_at = part_at + len(attribute) + 1
        if "$" in value:
            limits.append(Limit(attribute, value, None, _parse_terms(text, value, value_at)))
        else:
            limits.append(Limit(attribute, value))
    return limits


def _parse_terms(text: str, value: str, at: int) -> tuple[Term, ...]:
    """``{w|$attr[*w]}[{+|-}{w|$attr[*w]}...]`` (sge_resource_quota(5), dynamic limits)."""
    terms: list[Term] = []
    i = 0
    while i < len(value):
        match = _TERM.match(value, i)
        if match is None or match.end() == i:
            raise _fail(
                text,
                at + i,
                f"invalid dynamic limit {value!r}",
                "w, $attribute or $attribute*w joined by + or -",
            )
        sign_text, attribute, weight_text, number_text = match.groups()
        if sign_text is None and terms:
            raise _fail(
                text, at + i, f"invalid dynamic limit {value!r}", "'+' or '-' between terms"
            )
        try:
            weight = float(weight_text or number_text or "1")
        except ValueError:
            raise _fail(text, at + i, f"invalid weight in {value!r}", "a decimal number") from None
        if not math.isfinite(weight) or weight < 0:
            raise _fail(text, at + i, f"invalid weight in {value!r}", "a finite positive number")
        terms.append(Term(weight, attribute, -1 if sign_text == "-" else 1))
        i = match.end()
    return tuple(terms)
