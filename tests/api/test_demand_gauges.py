"""The demand figures' cache (app/api/demand_gauges.py): a TTL, one computation at a time
in a background thread while the others serve the last value, and a failure that keeps it.
No database: the computation is a stand-in the test holds and releases with events."""

from __future__ import annotations

import threading

from app.api.demand_gauges import DemandFigures, DemandGauges


def _figures(mark: int) -> DemandFigures:
    return DemandFigures(
        jobs={("never", "1"): mark},
        totals={"never": mark},
        workers={},
        starts={},
        unrunnable=0,
        computed_at=0.0,
        seconds=0.0,
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Computation:
    """Returns the figures of its next mark; with ``hold`` it waits for ``release`` first,
    and tells ``started`` that it runs."""

    def __init__(self) -> None:
        self.marks = 0
        self.hold = False
        self.fail = False
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> DemandFigures:
        self.started.set()
        if self.hold:
            self.release.wait()
        if self.fail:
            raise RuntimeError("the database went away")
        self.marks += 1
        return _figures(self.marks)


def test_the_first_call_waits_then_the_ttl_serves_the_same_figures() -> None:
    compute, clock = _Computation(), _Clock()
    gauges = DemandGauges(compute, ttl=30, clock=clock)
    assert gauges.figures() == _figures(1)
    clock.now += 29
    assert gauges.figures() == _figures(1)
    assert gauges.computations == 1


def test_a_stale_value_is_served_while_one_computation_refreshes_it() -> None:
    compute, clock = _Computation(), _Clock()
    gauges = DemandGauges(compute, ttl=30, clock=clock)
    assert gauges.figures() == _figures(1)
    clock.now += 30
    compute.hold = True
    compute.started.clear()
    # Stale: this call starts the refresh and answers with the last figures at once.
    assert gauges.figures() == _figures(1)
    compute.started.wait()
    # Single-flight: the others serve the last value and start nothing.
    assert [gauges.figures() for _ in range(3)] == [_figures(1)] * 3
    assert gauges.computations == 2
    compute.release.set()
    gauges.settle()
    assert gauges.figures() == _figures(2)
    assert gauges.computations == 2


def test_a_failed_computation_keeps_the_last_figures_and_is_tried_again() -> None:
    compute, clock = _Computation(), _Clock()
    gauges = DemandGauges(compute, ttl=30, clock=clock)
    assert gauges.figures() == _figures(1)
    clock.now += 30
    compute.fail = True
    assert gauges.figures() == _figures(1)
    gauges.settle()
    assert gauges.figures() == _figures(1)  # stale still: the next call tries again
    gauges.settle()
    assert gauges.computations == 3
    compute.fail = False
    gauges.figures()
    gauges.settle()
    assert gauges.figures() == _figures(2)


def test_zero_seconds_turns_the_figures_off() -> None:
    compute = _Computation()
    gauges = DemandGauges(compute, ttl=0)
    assert gauges.figures() is None
    assert gauges.computations == 0 and compute.marks == 0


def test_before_any_figures_a_second_caller_waits_for_the_first_computation() -> None:
    compute = _Computation()
    compute.hold = True
    gauges = DemandGauges(compute, ttl=30, clock=_Clock())
    answers: list[DemandFigures | None] = []
    first = threading.Thread(target=lambda: answers.append(gauges.figures()))
    first.start()
    compute.started.wait()
    second = threading.Thread(target=lambda: answers.append(gauges.figures()))
    second.start()
    compute.release.set()
    first.join()
    second.join()
    assert answers == [_figures(1), _figures(1)]
    assert gauges.computations == 1
