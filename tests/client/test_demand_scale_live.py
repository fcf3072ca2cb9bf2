"""`AdminClient.demand_scale` against a real `jobmatch serve` (issue 40): the figures KEDA's
metrics-api scaler reads, parsed into app/wire/demand_scale.py's dataclasses."""

from __future__ import annotations

import pytest

from app.client import AdminClient, JobSpec, JobState, TemplateSpec, ValidationFailed, WorkerSpec
from app.wire.demand_scale import DemandScale, TemplateScale

JAVA17_BOX = TemplateSpec(resources="language: ?java; java: ?17", slots=4, cost=1.0)


def test_demand_scale_through_the_client(admin: AdminClient) -> None:
    admin.put_template("java17-box", JAVA17_BOX)
    admin.put_template("gpu-box", TemplateSpec(resources="gpu: ?a100", cost=5.0))
    admin.register_worker(WorkerSpec(name="j12", resources="language: ?java; java: ?12"))
    jobs = [admin.submit_job(JobSpec(resources="language: java; java: 17")) for _ in range(3)]
    assert {job.state for job in jobs} == {JobState.WAITING}
    admin.submit_job(JobSpec(resources="language: java; java: 12"))

    cached = admin.demand_scale()
    assert isinstance(cached, DemandScale)
    assert cached.templates == {
        "gpu-box": TemplateScale(workers=0, jobs=0),
        "java17-box": TemplateScale(workers=1, jobs=3),
    }
    assert cached.jobs == {"never": 3, "capacity": 0, "policy": 0, "ready": 1, "waiting": 4}
    assert (cached.workers, cached.unrunnable) == (1, 0)
    assert cached.age_seconds >= 0

    named = admin.demand_scale(["gpu-box"])
    assert named.templates == {"gpu-box": TemplateScale(workers=0, jobs=0)}
    assert named.unrunnable == 3
    assert admin.demand_scale(every_template=True).templates == cached.templates

    with pytest.raises(ValidationFailed) as refused:
        admin.demand_scale(["nope"])
    assert refused.value.errors[0].field == "query.templates"
