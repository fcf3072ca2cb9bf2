"""The decay of usage (app/matching/ordering/decay.py) against the half-life formula of
HTCondor's accountant (PRIORITY_HALFLIFE: usage is multiplied by 0.5 ** (t / half-life))
and Slurm's multifactor priority (PriorityDecayHalfLife), and the ordering policy's words
(app/wire/ordering.py) as JOBMATCH_ORDERING checks them at start."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from app.matching.ordering.decay import booked, decayed, usage_log2
from app.settings import Settings
from app.wire.ordering import OrderingError, parse_ordering


@pytest.mark.parametrize(
    ("seconds", "factor"), [(0, 1.0), (3600, 0.5), (7200, 0.25), (1800, 2**-0.5), (36000, 2**-10)]
)
def test_usage_halves_every_halflife(seconds: float, factor: float) -> None:
    """HTCondor: after one PRIORITY_HALFLIFE the accumulated usage counts half."""
    assert decayed(1000.0, seconds, 3600.0) == pytest.approx(1000.0 * factor)


def test_booking_decays_the_old_usage_to_the_new_instant() -> None:
    usage, epoch = booked(800.0, 1_000.0, 50.0, 1_000.0 + 600.0, 600.0)
    assert (usage, epoch) == (pytest.approx(450.0), 1_600.0)


def test_a_late_booking_is_decayed_to_the_row_instant() -> None:
    """A report stamped before the row's instant does not move the row back in time."""
    usage, epoch = booked(100.0, 2_000.0, 80.0, 1_400.0, 600.0)
    assert (usage, epoch) == (pytest.approx(140.0), 2_000.0)


def test_two_bookings_in_a_row_equal_one_of_their_decayed_sum() -> None:
    first, at = booked(0.0, 0.0, 10.0, 100.0, 50.0)
    second, at = booked(first, at, 10.0, 150.0, 50.0)
    assert second == pytest.approx(10.0 * 0.5 + 10.0)
    assert at == 150.0


def test_the_pull_key_orders_as_the_decayed_usage_per_weight() -> None:
    """log2(usage / weight) + epoch / half-life differs between submitters by the same
    amount as log2 of their usages per weight decayed to any common instant."""
    halflife = 900.0
    a = (usage_log2(300.0, 1.0) or 0.0) + 1_000.0 / halflife
    b = (usage_log2(200.0, 2.0) or 0.0) + 1_900.0 / halflife
    now = 5_000.0
    decayed_a = decayed(300.0, now - 1_000.0, halflife) / 1.0
    decayed_b = decayed(200.0, now - 1_900.0, halflife) / 2.0
    assert a - b == pytest.approx(math.log2(decayed_a) - math.log2(decayed_b))
    assert usage_log2(0.0, 1.0) is None


def test_the_default_ordering_is_today_s() -> None:
    assert Settings().ordering == "priority,age"
    assert parse_ordering(" Fair-Share , priority,age") == ("fair-share", "priority", "age")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "expected at least one rule"),
        (
            "fair-share,prio",
            "rule 2 is 'prio': expected one of priority, group-share, fair-share, age",
        ),
        ("age,age", "rule 2 ('age') is named twice"),
        (
            "fair-share,group-share",
            "rule 2 ('group-share') comes after 'fair-share': "
            "expected 'group-share' before 'fair-share'",
        ),
    ],
)
def test_a_bad_ordering_is_refused_at_start(text: str, words: str) -> None:
    with pytest.raises(OrderingError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_ordering(text)
    with pytest.raises(ValidationError, match="ordering"):
        Settings(ordering=text)
