"""Grid Engine 6.2 resource quota sets (``qconf -arqs``; ``sge_resource_quota(5)``): the
text form in and out, and the rules that decide which rule of a set applies to a job.

A set is a name, a description, an enabled flag and ordered rules::

    {
       name         max_u_slots
       description  "each user at most 4 slots"
       enabled      TRUE
       limit        users {*} to slots=4
    }

A rule is ``limit [name N] [users L] [projects L] [pes L] [queues L] [hosts L] to
attr=value[,attr=value...]``. A filter list is comma separated; an item is a name or an
``fnmatch`` pattern (``*`` is everything), ``!`` before it excludes. Between braces the
list is *expanded*: the limit counts for each matching user (queue, host, ...) separately
instead of for all of them together. A backslash before a newline joins two lines, as
``sge_resource_quota(5)`` says. Within a set the first rule whose filters match a job (and
a queue instance) is the one that applies; every enabled set applies.

Where jobmatch's Grid Engine model has no such object the item is refused with a 422
rather than matched wrongly: ``@`` access lists (users) and ``@`` host groups (hosts).
Dynamic limits (``slots=$num_proc*2``) are parsed and checked as the man page and
qconf require (host-specific rules only, INT or DOUBLE attributes); app/matching evaluates
them against each host's value.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from app.notations.errors import NotationError
from app.notations.gridengine.attribute_table import ComplexTable
from app.notations.gridengine.definitions import ComplexError
from app.notations.gridengine.values import parse_value
from app.notations.quantities import QuantityError, ValueType

__all__ = [
    "FILTER_KINDS",
    "Filter",
    "FilterItem",
    "Limit",
    "QuotaError",
    "QuotaRule",
    "QuotaSet",
    "Term",
    "check_quota_set",
    "parse_quota_set",
    "parse_quota_sets",
]

#: The filters of a rule, in the order ``qconf -srqs`` prints them and in the order of
#: the usage key Grid Engine builds (``rqs_get_rue_string``: user, project, pe, queue, host).
FILTER_KINDS = ("users", "projects", "pes", "queues", "hosts")
_KEY_ORDER = ("users", "projects", "pes", "queues", "hosts")

#: Object names as Grid Engine's key check allows them (no blanks, separators or the
#: characters of this notation: braces, commas, ``!``, ``@``, ``/``, ``=``).
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
#: A filter item: a name or an fnmatch pattern (``*``, ``?``, ``[...]``).
_ITEM = re.compile(r"[A-Za-z0-9_.\-*?\[\]^]{1,255}")
_MAX_TEXT = 1_000_000
_MAX_RULES = 1_000


class QuotaError(NotationError):
    """A resource quota set's text breaks the ``sge_resource_quota(5)`` format (an unknown
    keyword, a malformed filter or limit, a duplicate rule name, a missing ``to``) or names
    something jobmatch cannot enforce (an access list, a host group, a non-consumable)."""

    notation = "sge-resource-quota"


@dataclass(frozen=True)
class FilterItem:
    """One item of a filter list: a name or pattern, maybe excluded with ``!``."""

    pattern: str
    negated: bool = False

    def matches(self, value: str | None, *, fold_case: bool = False) -> bool:
        """Whether the value matches the pattern; no pattern matches a missing value (a job
        without a project or PE), so ``*`` means "any project" and ``!*`` "no project"."""
        if value is None:
            return False
        if fold_case:
            return fnmatch.fnmatchcase(value.lower(), self.pattern.lower())
        return fnmatch.fnmatchcase(value, self.pattern)

    def to_text(self) -> str:
        return ("!" if self.negated else "") + self.pattern


@dataclass(frozen=True)
class Filter:
    """A rule's filter of one kind: its items, and whether it is expanded (``{...}``,
    a limit for each matching value separately)."""

    items: tuple[FilterItem, ...]
    expand: bool = False

    def matches(self, value: str | None, *, fold_case: bool = False) -> bool:
        """Grid Engine's ``rqs_filter_match``: an excluded item that matches rejects; else
        the value must match one of the other items, if there are any."""
        positive = [item for item in self.items if not item.negated]
        if any(item.matches(value, fold_case=fold_case) for item in self.items if item.negated):
            return False
        return not positive or any(item.matches(value, fold_case=fold_case) for item in positive)

    def to_text(self) -> str:
        body = ",".join(item.to_text() for item in self.items)
        return "{" + body + "}" if self.expand else body


@dataclass(frozen=True)
class Term:
    """One term of a dynamic limit: ``weight`` times the host's value of ``attribute``
    (a plain number when ``attribute`` is None); ``sign`` is +1 or -1."""

    weight: float
    attribute: str | None = None
    sign: int = 1

    def to_text(self, first: bool) -> str:
        weight = _number_text(self.weight)
        body = weight if self.attribute is None else f"${self.attribute}"
        if self.attribute is not None and self.weight != 1.0:
            body += f"*{weight}"
        if first:
            return body if self.sign > 0 else f"-{body}"
        return ("+" if self.sign > 0 else "-") + body


@dataclass(frozen=True)
class Limit:
    """``attribute=value``: a static limit (``number`` in base units, bytes or seconds)
    or a dynamic one (``terms``, evaluated per host)."""

    attribute: str
    text: str
    number: float | None = None
    terms: tuple[Term, ...] = ()

    @property
    def dynamic(self) -> bool:
        return bool(self.terms)

    def value_for(self, host_values: dict[str, float]) -> float | None:
        """The limit's value: the static number, or the dynamic sum over the host's values
        (None when the host lacks a value a term needs: Grid Engine then drops the job
        for this host, "invalid dynamical limit")."""
        if not self.terms:
            return self.number
        total = 0.0
        for term in self.terms:
            if term.attribute is None:
                part = term.weight
            else:
                found = host_values.get(term.attribute)
                if found is None:
                    return None
                part = term.weight * found
            total += term.sign * part
        return total

    def to_text(self) -> str:
        return f"{self.attribute}={self.text}"


@dataclass(frozen=True)
class QuotaRule:
    """A ``limit`` line: its optional name, its filters (None: not given, matches every
    job) and its limits."""

    limits: tuple[Limit, ...]
    name: str | None = None
    users: Filter | None = None
    projects: Filter | None = None
    pes: Filter | None = None
    queues: Filter | None = None
    hosts: Filter | None = None

    def filter(self, kind: str) -> Filter | None:
        found: Filter | None = getattr(self, kind)
        return found

    def matches(
        self, user: str, project: str | None, pe: str | None, queue: str, host: str
    ) -> bool:
        """Whether the rule's filters all match a job of ``user`` (with its project and
        PE, None without) on queue instance ``queue@host``."""
        values = {"users": user, "projects": project, "pes": pe, "queues": queue, "hosts": host}
        for kind in FILTER_KINDS:
            found = self.filter(kind)
            if found is not None and not found.matches(values[kind], fold_case=kind == "hosts"):
                return False
        return True

    def usage_key(
        self, user: str, project: str | None, pe: str | None, queue: str, host: str
    ) -> str:
        """The name of the usage entry a job debits (``rqs_get_rue_string``): the values of
        the expanded filters in the order user/project/pe/queue/host, empty for filters
        that count everything together; e.g. ``alice////`` for ``users {*}``."""
        values = {"users": user, "projects": project, "pes": pe, "queues": queue, "hosts": host}
        parts = []
        for kind in _KEY_ORDER:
            found = self.filter(kind)
            value = values[kind]
            if found is not None and found.expand and value is not None:
                parts.append(value.lower() if kind == "hosts" else value)
            else:
                parts.append("")
        return "/".join(parts)

    def to_text(self) -> str:
        words = []
        if self.name is not None:
            words += ["name", self.name]
        for kind in FILTER_KINDS:
            found = self.filter(kind)
            if found is not None:
                words += [kind, found.to_text()]
        words += ["to", ",".join(limit.to_text() for limit in self.limits)]
        return " ".join(words)


@dataclass(frozen=True)
class QuotaSet:
    """A resource quota set: rules in order, the first matching one applies."""

    name: str
    rules: tuple[QuotaRule, ...]
    description: str = "NONE"
    enabled: bool = False

    def rule_label(self, index: int) -> str:
        """A rule as Grid Engine names it in messages: ``set/rule-name`` or ``set/N``
        (1-based)."""
        rule = self.rules[index]
        return f"{self.name}/{rule.name if rule.name is not None else index + 1}"

    def to_text(self) -> str:
        """The set as ``qconf -srqs`` prints it."""
        description = self.description
        if description != "NONE":
            description = '"' + description + '"'
        lines = [
            "{",
            f"   {'name':<13}{self.name}",
            f"   {'description':<13}{description}",
            f"   {'enabled':<13}{'TRUE' if self.enabled else 'FALSE'}",
        ]
        lines += [f"   {'limit':<13}{rule.to_text()}" for rule in self.rules]
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# Parsing


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
            what = (
                "access lists"
                if kind == "users"
                else "host groups"
                if kind == "hosts"
                else "groups"
            )
            raise _fail(
                text,
                item_at,
                f"{kind} item {part!r} names a group; jobmatch has no {what}",
                f"{kind} names or patterns",
            )
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


# ---------------------------------------------------------------------------------------
# Validation against the attribute table


def check_quota_set(
    quota_set: QuotaSet, table: ComplexTable, *, text: str | None = None
) -> QuotaSet:
    """The set with its limits resolved against the attribute table: full attribute names,
    static values parsed for their type (``number`` in base units). A limit must name a
    consumable (``slots`` included: jobmatch enforces limits on what jobs book); a dynamic
    limit's attributes must be INT or DOUBLE (``sge_resource_quota(5)``). Positions in
    errors point into ``text``, the text the set was parsed from (else its canonical text)."""
    if text is None:
        text = quota_set.to_text()
    rules = []
    for index, rule in enumerate(quota_set.rules):
        limits = []
        label = quota_set.rule_label(index)
        for limit in rule.limits:
            position = text.find(limit.to_text())
            try:
                definition = table.resolve(limit.attribute, text=text, position=position)
            except ComplexError as error:
                raise _fail(
                    text, position, f"rule {label!r}: {error.message}", "a consumable attribute"
                ) from None
            if not definition.is_consumable:
                raise _fail(
                    text,
                    position,
                    f"rule {label!r}: {definition.name!r} is not a consumable",
                    "a consumable attribute or slots (limits on fixed values are not enforced)",
                )
            if limit.dynamic:
                for term in limit.terms:
                    if term.attribute is None:
                        continue
                    found = table.lookup(term.attribute)
                    if found is None or found.type not in (ValueType.INT, ValueType.DOUBLE):
                        raise _fail(
                            text,
                            position,
                            f"rule {label!r}: ${term.attribute} is not an INT or DOUBLE attribute",
                            "an INT or DOUBLE attribute in a dynamic limit",
                        )
                terms = tuple(
                    replace(t, attribute=None if t.attribute is None else table[t.attribute].name)
                    for t in limit.terms
                )
                limits.append(Limit(definition.name, limit.text, None, terms))
                continue
            try:
                number = parse_value(definition, limit.text, role="capacity")
            except (ComplexError, QuantityError) as error:
                raise _fail(
                    text,
                    position,
                    f"rule {label!r}: invalid value {limit.text!r} for {definition.name!r}: "
                    f"{getattr(error, 'message', error)}",
                    f"a value of type {definition.type.name}",
                ) from None
            assert isinstance(number, float)
            limits.append(Limit(definition.name, limit.text, number))
        rules.append(replace(rule, limits=tuple(limits)))
    return replace(quota_set, rules=tuple(rules))


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)
