"""The task range of a Grid Engine array job: ``qsub -t n[-m[:s]]``.

qsub(1) of Grid Engine 6.2u5: "-t n[-m[:s]] Submits a so called Array Job, i.e. an array of
identical tasks being differentiated only by an index number ... The tasks are numbered n,
n+s, ... up to m"; n, m and s are positive integers with m >= n (the default step is 1, and
``-t n`` alone is one task). As Grid Engine does, the end is corrected to the last id of
the range (``1-100:2`` is ``1-99:2``). Each task sees its index in SGE_TASK_ID, and the range in
SGE_TASK_FIRST, SGE_TASK_LAST and SGE_TASK_STEPSIZE.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.notations.errors import NotationError

#: Largest task id (Grid Engine's are 32-bit; jobs.task_id is an INTEGER).
MAX_TASK_ID = 2**31 - 1


class TaskRangeError(NotationError):
    notation = "qsub -t"


@dataclass(frozen=True)
class TaskRange:
    """The tasks ``first``, ``first + step``, ... up to ``last`` (inclusive)."""

    first: int
    last: int
    step: int

    @property
    def count(self) -> int:
        return (self.last - self.first) // self.step + 1

    def ids(self) -> range:
        return range(self.first, self.last + 1, self.step)

    def __str__(self) -> str:
        return f"{self.first}-{self.last}:{self.step}"


def _number(text: str, start: int, what: str) -> tuple[int, int]:
    """The ASCII digits at ``start``: their value and the position after them."""
    end = start
    while end < len(text) and text[end].isascii() and text[end].isdigit():
        end += 1
    if end == start:
        raise TaskRangeError(f"{what} missing", text=text, position=start, expected=what)
    value = int(text[start:end])
    if value < 1:
        raise TaskRangeError(
            f"{what} must be at least 1", text=text, position=start, expected=f"{what} >= 1"
        )
    if value > MAX_TASK_ID:
        raise TaskRangeError(
            f"{what} is too large", text=text, position=start, expected=f"{what} <= {MAX_TASK_ID}"
        )
    return value, end


def parse_task_range(text: str) -> TaskRange:
    """``n``, ``n-m`` or ``n-m:s``: n >= 1, m >= n, s >= 1 (qsub -t)."""
    first, at = _number(text, 0, "a task id n")
    last, step = first, 1
    expected = "'-m' or the end"
    if at < len(text) and text[at] == "-":
        expected = "':s' or the end"
        last, at = _number(text, at + 1, "a last task id m")
        if last < first:
            raise TaskRangeError(
                f"last task id {last} is below the first, {first}",
                text=text,
                position=at - len(str(last)),
                expected=f"m >= {first}",
            )
        if at < len(text) and text[at] == ":":
            step, at = _number(text, at + 1, "a step s")
            expected = "the end"
    if at != len(text):
        raise TaskRangeError(f"unexpected {text[at]!r}", text=text, position=at, expected=expected)
    # Grid Engine's range_correct_end() (sgeobj/sge_range.c, applied when a job is
    # verified): the end becomes the last id of the range, 1-100:2 is 1-99:2, which is
    # what SGE_TASK_LAST then says.
    return TaskRange(first, first + (last - first) // step * step, step)
