"""qsub -t n[-m[:s]] (qsub(1) of Grid Engine 6.2u5: "-t n[-m[:s]] Submits a so called Array
Job ... The tasks are numbered n, n+s, ... up to m"), parsed strictly."""

from __future__ import annotations

import pytest

from app.notations.errors import NotationError
from app.notations.gridengine.task_ranges import TaskRange, TaskRangeError, parse_task_range


@pytest.mark.parametrize(
    ("text", "expected", "ids"),
    [
        ("1", TaskRange(1, 1, 1), [1]),
        ("4-6", TaskRange(4, 6, 1), [4, 5, 6]),
        ("1-10:3", TaskRange(1, 10, 3), [1, 4, 7, 10]),
        ("7-7:5", TaskRange(7, 7, 5), [7]),
        # The man page's own example: -t 2-10:2 gives the indices 2, 4, 6, 8 and 10.
        ("2-10:2", TaskRange(2, 10, 2), [2, 4, 6, 8, 10]),
        # Grid Engine's range_correct_end() (sgeobj/sge_range.c): the end becomes the
        # last id of the range, as SGE_TASK_LAST says.
        ("1-10:4", TaskRange(1, 9, 4), [1, 5, 9]),
        ("1-100:2", TaskRange(1, 99, 2), list(range(1, 100, 2))),
    ],
)
def test_ranges(text: str, expected: TaskRange, ids: list[int]) -> None:
    parsed = parse_task_range(text)
    assert parsed == expected
    assert list(parsed.ids()) == ids
    assert parsed.count == len(ids)


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("", 0, "a task id n"),
        ("0", 0, "a task id n >= 1"),
        ("5-3", 2, "m >= 5"),
        ("1-", 2, "a last task id m"),
        ("1-5:", 4, "a step s"),
        ("1-5:0", 4, "a step s >= 1"),
        ("1x", 1, "'-m' or the end"),
        ("1-5x", 3, "':s' or the end"),
        ("1-5:2x", 5, "the end"),
        ("1:2", 1, "'-m' or the end"),
        (" 1", 0, "a task id n"),
        ("-3", 0, "a task id n"),
        ("\uff11", 0, "a task id n"),  # a fullwidth digit one
        ("3000000000", 0, "a task id n <= 2147483647"),
    ],
)
def test_errors_name_the_notation_position_and_expectation(
    text: str, position: int, expected: str
) -> None:
    with pytest.raises(TaskRangeError) as caught:
        parse_task_range(text)
    error = caught.value
    assert isinstance(error, NotationError)
    assert error.notation == "qsub -t"
    assert error.position == position
    assert error.expected == expected
    assert str(error).startswith("qsub -t: ")
