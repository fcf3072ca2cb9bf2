"""The speed paths of the Momotor parser (fast_path.py) against the exact ones and Momotor.

``from_string`` first tries a fast path (``parse_fast``: quoted spans and escapes
swapped for stand-ins, then plain string splits) and falls back to the scanner that mirrors
Momotor's ``Resources.from_string`` for everything else. ``match`` decides each group
pair with set relations instead of walking the match table (sections a-c). These tests hold
both to the exact behaviour on generated definitions shaped like real ones: several groups
and items, optional and excluded tags, quoted and escaped values holding separators, odd
blanks and every layout; test_tags_differential.py covers the small, adversarial alphabet.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.notations.momotor.errors import ConflictingModesError, TagsError
from app.notations.momotor.fast_path import parse_fast
from app.notations.momotor.groups import ResourceGroup
from app.notations.momotor.items import ResourceItem, Tag
from app.notations.momotor.resources import Resources
from app.notations.momotor.scanner import parse_located
from app.notations.momotor.strengths import NEUTRAL, NoMatch
from tests.support.thoroughness import examples

momotor = pytest.importorskip("momotor.shared.resources")

SETTINGS = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

NAMES = ["language", "java", "test case", "memory-class", "lib.numpy", "a", "é", "x_1", "a  b"]
# Characters of values: plain ones, blanks, and every character that needs quoting/escaping.
VALUE_CHARS = [*"abx19.-_é?~", " ", "\t", ",", ";", ":", "'", '"', "\\", "\n"]
SPECIAL = set(",;:'\"\\\n")


@st.composite
def written_value(draw: st.DrawFn) -> str:
    """One item as a person might write it: a prefix, then the value bare (when it can be),
    single- or double-quoted, or with each special character escaped."""
    prefix = draw(st.sampled_from(["", "", "?", "~"]))
    value = draw(st.text(alphabet=st.sampled_from(VALUE_CHARS), min_size=1, max_size=8))
    plain = not (SPECIAL & set(value)) and value.strip(" \t") == value
    way = draw(
        st.sampled_from(
            ["bare", "single", "double", "escape"] if plain else ["single", "double", "escape"]
        )
    )
    if way == "bare":
        return prefix + value
    if way == "escape":
        return prefix + "".join("\\" + c if c in SPECIAL or c in " \t" else c for c in value)
    quote = "'" if way == "single" else '"'
    return prefix + quote + value.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


COMMAS = [",", ", ", ", ", " , ", ",  ", "\t,", ",\t"]
COLONS = [":", ": ", ": ", " : ", ":\t", ":  "]
SEPARATORS = [";", "; ", "; ", "\n", "\n", "\n    ", " ;", "\r\n"]


@st.composite
def realistic_definition(draw: st.DrawFn) -> str:
    groups = draw(
        st.lists(
            st.tuples(
                st.sampled_from(NAMES),
                st.lists(written_value(), max_size=5),
                st.sampled_from(COLONS),
                st.sampled_from(COMMAS),
            ),
            min_size=1,
            max_size=5,
        )
    )
    text = draw(st.sampled_from(SEPARATORS)).join(
        name + colon + comma.join(items) for name, items, colon, comma in groups
    )
    return draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", "\n", " "]))


def exact_groups(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """The scanner's groups: names in first-seen order, item texts merged and de-duplicated
    (a tag in two modes shows up as two texts with one value)."""
    merged: dict[str, dict[str, None]] = {}
    for name, items in parse_located(text):
        texts = merged.setdefault(name, {})
        for item, _ in items:
            texts[Tag(item).as_str()] = None
    return [(name, tuple(texts)) for name, texts in merged.items()]


def conflicted(groups: list[tuple[str, tuple[str, ...]]]) -> bool:
    return any(len({Tag(text).value for text in texts}) != len(texts) for _, texts in groups)


@SETTINGS
@given(realistic_definition())
def test_fast_path_agrees_with_scanner_on_realistic_definitions(text: str) -> None:
    fast = parse_fast(text)
    try:
        exact = exact_groups(text)
    except TagsError:
        assert fast is None
        return
    if fast is not None:
        assert [(name, group.as_str_tuple()) for name, group in fast.items()] == exact
    elif not conflicted(exact) and " \\" not in text and "\t\\" not in text:
        # The fast path must take every ordinary definition: it declines only for a tag
        # in two modes or for blanks before a backslash (quirk Q8). Otherwise the speed
        # claims of bench/tags.py would rest on the scanner.
        pytest.fail(f"fast path declined {text!r}")


def _outcome(parse: object, text: str) -> object:
    # Which error is raised is compared in test_tags_differential.py; here any error
    # counts the same (generated definitions are almost always valid).
    try:
        resources = parse(text)  # type: ignore[operator]
    except ConflictingModesError:
        return "conflict"
    except (ValueError, AssertionError):
        return "error"
    return [(name, tuple(items)) for name, items in resources.as_tuples()]


@SETTINGS
@given(realistic_definition())
def test_realistic_definitions_parse_like_momotor(text: str) -> None:
    ours = _outcome(Resources.from_string, text)
    if ours == "conflict":
        return  # deviation 2 (resources.py docstring): Momotor keeps both modes
    assert ours == _outcome(momotor.Resources.from_string, text)


# --- match: set relations against the table walk (momotor.md, matching) ------------------

VALUES = ["x", "y", "z", "w", "v"]
group_items = st.lists(
    st.tuples(st.sampled_from(["", "?", "~"]), st.sampled_from(VALUES)).map("".join),
    max_size=6,
)
definitions = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), group_items, max_size=4)


def walk_group(task: ResourceGroup, worker: ResourceGroup) -> float | None:
    """Section (c)'s group procedure, cell by cell from the single-tag table."""
    best: float | None = None
    remaining = {item.value: item for item in worker.items}
    for item in task.items:
        other = remaining.pop(item.value, None)
        if other is None:
            if item.required:
                raise NoMatch
            continue
        cell = item.compare(other)
        if cell is not None and (best is None or cell < best):
            best = cell
    for other in remaining.values():
        ResourceItem.compare_missing(other)
    return best


def walk(task: Resources, worker: Resources) -> object:
    """Section (c) across groups: the maximum over every name on either side."""
    names = dict.fromkeys([*task.group_names(), *worker.group_names()])
    worst = None
    try:
        for name in names:
            value = walk_group(task.get(name), worker.get(name))  # type: ignore[arg-type]
            value = NEUTRAL if value is None else value
            worst = value if worst is None else max(worst, value)
    except NoMatch:
        return "NoMatch"
    return NEUTRAL if worst is None else worst


def _build(definition: dict[str, list[str]]) -> Resources | None:
    try:
        return Resources.from_dict(definition)
    except ConflictingModesError:
        return None


@settings(max_examples=examples(400), deadline=None)
@given(definitions, definitions)
def test_set_match_equals_table_walk(
    task_items: dict[str, list[str]], worker_items: dict[str, list[str]]
) -> None:
    task, worker = _build(task_items), _build(worker_items)
    if task is None or worker is None:
        return
    try:
        got: object = task.match(worker)
    except NoMatch:
        got = "NoMatch"
    assert got == walk(task, worker)
    for name in dict.fromkeys([*task.group_names(), *worker.group_names()]):
        task_group, worker_group = task.get(name), worker.get(name)
        try:
            expected: object = walk_group(task_group, worker_group)  # type: ignore[arg-type]
        except NoMatch:
            expected = "NoMatch"
        try:
            value: object = task_group.match(worker_group)  # type: ignore[arg-type]
        except NoMatch:
            value = "NoMatch"
        assert value == expected


@SETTINGS
@given(definitions, definitions)
def test_set_match_equals_momotor(
    task_items: dict[str, list[str]], worker_items: dict[str, list[str]]
) -> None:
    task, worker = _build(task_items), _build(worker_items)
    if task is None or worker is None:
        return
    try:
        ours: object = task.match(worker)
    except NoMatch:
        ours = "NoMatch"
    # Momotor keeps exact duplicates in from_dict (quirk Q2, deviation 3): give it the
    # de-duplicated items we hold.
    theirs_task = momotor.Resources.from_dict(
        {n: list(dict.fromkeys(i)) for n, i in task_items.items()}
    )
    theirs_worker = momotor.Resources.from_dict(
        {n: list(dict.fromkeys(i)) for n, i in worker_items.items()}
    )
    try:
        theirs: object = theirs_task.match(theirs_worker)
    except momotor.NoMatch:
        theirs = "NoMatch"
    assert ours == theirs
