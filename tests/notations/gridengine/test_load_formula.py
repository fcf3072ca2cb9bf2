"""The scheduler's ``load_formula``.

Sources: sched_conf(5) of Grid Engine 6.2u5 (load_formula: "{w1|load_val1[*w1]}[{+|-}
{w2|load_val2[*w2]}[{+|-}...]]", default np_load_avg); validate_load_formula() in
source/libs/sgeobj/sge_centry.c (what qconf -msconf accepts: not ``none``, first factor a
non-string attribute or a number, the weight a number, one weight at most);
scaled_mixed_load() and ERROR_LOAD_VAL (9999) in source/libs/sched/sort_hosts.c (the value
of a host; a missing value makes the host "heavily loaded")."""

from __future__ import annotations

import pytest

from app.notations.gridengine.attribute_table import default_table
from app.notations.gridengine.definitions import ComplexDefinition
from app.notations.gridengine.load_formula import (
    DEFAULT_LOAD_FORMULA,
    ERROR_LOAD_VALUE,
    LoadFormulaError,
    parse_load_formula,
)

TABLE = default_table()


def _values(**given: float) -> object:
    def value_of(definition: ComplexDefinition) -> float | None:
        return given.get(definition.name)

    return value_of


def test_the_default_formula_is_np_load_avg() -> None:
    formula = parse_load_formula(DEFAULT_LOAD_FORMULA, TABLE)
    assert formula.text() == "np_load_avg"
    assert formula.evaluate(_values(np_load_avg=0.25)) == 0.25  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "stored", "values", "expected"),
    [
        (
            "np_load_avg*2+mem_used",
            "np_load_avg*2+mem_used",
            {"np_load_avg": 0.5, "mem_used": 3.0},
            4.0,
        ),
        ("-nla+10", "-np_load_avg+10", {"np_load_avg": 0.5}, 9.5),
        ("load_avg-num_proc*0.5", "load_avg-num_proc*0.5", {"load_avg": 3.0, "num_proc": 4.0}, 1.0),
        ("$load_avg", "load_avg", {"load_avg": 1.5}, 1.5),
        ("2", "2", {}, 2.0),
        ("1.5*2-load_avg", "1.5*2-load_avg", {"load_avg": 1.0}, 2.0),
        # Left to right: a-b-c is (a-b)-c.
        (
            "load_avg-load_short-load_medium",
            "load_avg-load_short-load_medium",
            {"load_avg": 10.0, "load_short": 3.0, "load_medium": 2.0},
            5.0,
        ),
    ],
)
def test_terms_are_weighted_and_summed_left_to_right(
    text: str, stored: str, values: dict[str, float], expected: float
) -> None:
    formula = parse_load_formula(text, TABLE)
    assert formula.text() == stored
    assert formula.evaluate(_values(**values)) == pytest.approx(expected)  # type: ignore[arg-type]


def test_a_missing_value_makes_the_host_heavily_loaded() -> None:
    formula = parse_load_formula("np_load_avg+mem_used*2", TABLE)
    assert formula.evaluate(_values(np_load_avg=0.1)) == ERROR_LOAD_VALUE  # type: ignore[arg-type]
    assert ERROR_LOAD_VALUE == 9999.0


@pytest.mark.parametrize(
    ("text", "position", "expected", "message"),
    [
        ("", 0, "an attribute or a number", "empty"),
        ("none", 0, "an attribute or a number", "'none' is not allowed"),
        ("NONE", 0, "an attribute or a number", "'none' is not allowed"),
        ("np_load_avg*2*3", 13, "'+', '-' or the end of the formula", "one weighting factor"),
        ("np_load_avg*mem_used", 12, "a number", "weighting factor must be a number"),
        ("np_load_avg*$x", 12, "a number", "weighting factor must be a number"),
        ("np_load_avg+arch", 12, "a numeric attribute", "of type RESTRING"),
        ("np_load_avg+nosuch", 12, "an attribute of the complex", "unknown attribute 'nosuch'"),
        ("np_load_avg++mem_used", 12, "an attribute or a number", "empty term"),
        ("np_load_avg+", 12, "an attribute or a number", "the end of the formula"),
        ("np_load_avg + mem_used", 11, "'*', '+', '-' or the end of the formula", "a blank"),
        ("np_load_avg*2 ", 13, "'+', '-' or the end of the formula", "a blank"),
        ("np_load_avg/2", 11, "'*', '+', '-' or the end of the formula", "'/'"),
        ("np_load_avg*", 12, "a number", "number was expected"),
        (".+1", 0, "a digit", "a number needs a digit"),
        ("2x", 1, "'*', '+', '-' or the end of the formula", "'x'"),
    ],
)
def test_errors_name_the_position_and_what_was_expected(
    text: str, position: int, expected: str, message: str
) -> None:
    with pytest.raises(LoadFormulaError) as caught:
        parse_load_formula(text, TABLE)
    error = caught.value
    assert (error.position, error.expected) == (position, expected)
    assert message in error.message
    assert error.notation == "sched_conf load_formula"


def test_an_overlong_formula_is_refused() -> None:
    with pytest.raises(LoadFormulaError) as caught:
        parse_load_formula("+".join(["np_load_avg"] * 400), TABLE)
    assert caught.value.position == 4096
