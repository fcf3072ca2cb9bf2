"""A queue instance as a worker's registration names it (``queues`` of ``POST
/v1/workers`` and ``PATCH /v1/workers/{name}``): the client sends it, the server's worker
registration takes it as it is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueSpec:
    """A Grid Engine queue instance on a worker: the cluster queue's name and the
    instance's slots."""

    name: str
    slots: int
