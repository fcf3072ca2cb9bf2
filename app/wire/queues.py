"""A worker's queue instances on the wire: as its registration names them (``queues`` of
``POST /v1/workers`` and ``PATCH /v1/workers/{name}``), which the client sends and the
server's worker registration takes as they are, and as a worker's answer shows them, which
the server builds and the client reads as they are."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueSpec:
    """A Grid Engine queue instance on a worker: the cluster queue's name and the
    instance's slots."""

    name: str
    slots: int


@dataclass(frozen=True)
class QueueSlots:
    """A queue instance as a worker's answer shows it (``QueueInstanceOut``): the cluster
    queue's name, the instance's slots and how many of them running jobs use."""

    queue: str
    slots: int
    used_slots: int
