"""Where an outcome departs from a case's ``expected``: the one comparison the runner, the
command line and the tests share.

Only the keys ``expected`` names are compared, at every depth; ``message`` keys are
informative and never compared; numbers agree within 1e-6; lists compare element by
element. A ``refused`` text agrees when the outcome's text contains it, so a case states
the words that matter ("No suitable worker found", "unknown task") without copying every
detail of a notation error's message.
"""

from __future__ import annotations

from typing import Any

UNCOMPARED_KEYS = frozenset({"message"})
CONTAINED_KEYS = frozenset({"refused"})
FLOAT_TOLERANCE = 1e-6

#: What a key the outcome lacks compares as: unequal to everything, null included.
_MISSING: Any = object()


def differences(expected: Any, actual: Any, path: str = "") -> list[dict[str, Any]]:
    """One ``{path, expected, actual}`` per differing leaf (``actual`` null when the
    outcome lacks it)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key, value in expected.items():
            if key in UNCOMPARED_KEYS:
                continue
            got = actual.get(key, _MISSING)
            if key in CONTAINED_KEYS and _contains(got, value):
                continue
            found += differences(value, got, f"{path}.{key}")
        return found
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        found = []
        for index, (wanted, got) in enumerate(zip(expected, actual, strict=True)):
            found += differences(wanted, got, f"{path}[{index}]")
        return found
    if actual is not _MISSING and (_numbers_agree(expected, actual) or expected == actual):
        return []
    shown = None if actual is _MISSING else actual
    return [{"path": path or ".", "expected": expected, "actual": shown}]


def matches(expected: Any, actual: Any) -> bool:
    return not differences(expected, actual)


def _contains(actual: Any, expected: Any) -> bool:
    return isinstance(actual, str) and isinstance(expected, str) and expected in actual


def _numbers_agree(expected: Any, actual: Any) -> bool:
    numbers = (int, float)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return False
    if not (isinstance(expected, numbers) and isinstance(actual, numbers)):
        return False
    return abs(float(expected) - float(actual)) < FLOAT_TOLERANCE
