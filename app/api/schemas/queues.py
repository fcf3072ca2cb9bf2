"""Bodies of the cluster queue routes (queue_conf(5) attributes jobmatch models)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.common import Text


class QueueConfIn(BaseModel):
    """What an admin sets of a cluster queue (``qconf -mattr queue ...``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"load_thresholds": "np_load_avg=1.75,mem_free=1G"}]},
    )

    load_thresholds: Text = Field(
        max_length=65_536,
        description=(
            "queue_conf(5) load_thresholds: `name=value` load value thresholds separated by "
            "commas, `NONE` (or empty) for none; an instance whose host exceeds one takes "
            "no new job"
        ),
    )


class QueueConfOut(BaseModel):
    """A cluster queue: its name, its place in the queue order and its thresholds."""

    name: str = Field(description="the cluster queue's name")
    seq_no: int = Field(description="queue order: lower first (queue_conf(5) seq_no)")
    load_thresholds: str = Field(description="its load thresholds, `NONE` for none")
