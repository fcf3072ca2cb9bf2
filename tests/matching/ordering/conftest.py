"""The ordering policy of the process, set for one test and put back after it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from app.matching.ordering import policy


@pytest.fixture
def use_ordering() -> Iterator[Callable[..., policy.Ordering]]:
    """Set the process's ordering policy (``use_ordering("fair-share,priority,age")``)."""

    def use(text: str, halflife_seconds: float = 86_400.0) -> policy.Ordering:
        ordering = policy.Ordering.of(text, halflife_seconds)
        policy.use(ordering)
        return ordering

    yield use
    policy.use(policy.DEFAULT)
