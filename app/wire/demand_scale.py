"""The shape of ``GET /v1/demand/scale`` (issue 40): the demand figures as plain numbers at
fixed JSON paths, for autoscalers that read one number from a URL (KEDA's ``metrics-api``
scaler reads it at a GJSON ``valueLocation`` such as ``templates.java17-box.workers``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TemplateScale:
    """One worker template: the new workers of it in the suggested mix, and the waiting
    jobs they would start (both 0 when the mix uses none of it)."""

    workers: int
    jobs: int


@dataclass(frozen=True)
class DemandScale:
    """The figures: per template (by name), the waiting jobs per answer (``never``,
    ``capacity``, ``policy``, ``ready``, and ``waiting`` for all of them), the mix's new
    workers in all, the waiting jobs no template could run, and how old the figures are
    (seconds; they are kept up to JOBMATCH_DEMAND_METRICS_SECONDS)."""

    templates: dict[str, TemplateScale]
    jobs: dict[str, int]
    workers: int
    unrunnable: int
    age_seconds: float
