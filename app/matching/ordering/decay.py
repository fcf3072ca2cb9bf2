"""The decay of usage with a half-life, as HTCondor's accountant decays a user's usage
(PRIORITY_HALFLIFE) and Slurm's multifactor plugin decays usage (PriorityDecayHalfLife):
what was used ``t`` seconds ago counts ``2 ** (-t / half-life)`` of its amount now. Pure
arithmetic, tested against the formula (tests/matching/ordering/test_decay.py)."""

from __future__ import annotations

import math


def decayed(usage: float, seconds: float, halflife_seconds: float) -> float:
    """``usage`` booked ``seconds`` ago, as it counts now."""
    return usage * math.pow(2.0, -seconds / halflife_seconds)


def booked(
    usage: float, usage_epoch: float, amount: float, at_epoch: float, halflife_seconds: float
) -> tuple[float, float]:
    """The usage after ``amount`` is booked at ``at_epoch`` onto ``usage`` (as of
    ``usage_epoch``), and the instant it is as of: the later of the two, so that a
    booking that arrives late (a report stamped before the last booking) is decayed to
    the row's instant instead of moving the row back in time."""
    if at_epoch >= usage_epoch:
        return decayed(usage, at_epoch - usage_epoch, halflife_seconds) + amount, at_epoch
    return usage + decayed(amount, usage_epoch - at_epoch, halflife_seconds), usage_epoch


def usage_log2(usage: float, weight: float) -> float | None:
    """log2 of the usage per weight, which the pull orders by; None at no usage."""
    return math.log2(usage / weight) if usage > 0 else None
