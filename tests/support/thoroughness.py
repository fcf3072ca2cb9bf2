"""How thorough the property tests are: the Hypothesis profiles `dev` and `ci` (issue 34).

`ci` (chosen where CI is set, as `.ci/run` runs) keeps every property's example count as
it was before profiles existed, and sets no deadline: on a loaded machine a slow example
is not a failure (timing never gates a test). `dev` (a developer's `make test`) runs a
third of each count, at least a few, and fails an example only past two seconds, which no
healthy example comes near: it still catches a property gone pathologically slow.
``JOBMATCH_HYPOTHESIS_PROFILE`` picks one explicitly.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "JOBMATCH_HYPOTHESIS_PROFILE"
#: Hypothesis' own default count, which properties without a count of their own ran.
DEFAULT_EXAMPLES = 100
#: The share of each count the dev profile runs, and the fewest it runs.
DEV_SHARE = 3
DEV_MINIMUM = 5


def profile_name() -> str:
    chosen = os.environ.get(PROFILE_ENV)
    if chosen:
        return chosen
    return "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"


def examples(ci_count: int) -> int:
    """The example count of a property that CI runs ``ci_count`` times."""
    return examples_for(profile_name(), ci_count)


def register_profiles() -> None:
    """Register both profiles and load the one this run uses."""
    # too_slow measures data generation against wall time: a loaded machine is not a bug.
    relaxed = [HealthCheck.too_slow]
    settings.register_profile(
        "ci", max_examples=DEFAULT_EXAMPLES, deadline=None, suppress_health_check=relaxed
    )
    settings.register_profile(
        "dev",
        max_examples=examples_for("dev", DEFAULT_EXAMPLES),
        deadline=2000,
        suppress_health_check=relaxed,
    )
    settings.load_profile(profile_name())


def examples_for(profile: str, ci_count: int) -> int:
    if profile == "ci":
        return ci_count
    return min(ci_count, max(DEV_MINIMUM, ci_count // DEV_SHARE))
