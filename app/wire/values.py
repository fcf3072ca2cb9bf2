"""The Grid Engine values of one object (``GET /v1/values/...``) as the server builds them
and the client reads them: the texts of each kind by attribute name (the worker's reported
load values apart), which of them matching sees, and each consumable's capacity with what
running jobs book of it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Consumption:
    """A consumable's capacity at one object and what running jobs book of it now."""

    capacity: float
    used: float


@dataclass(frozen=True)
class Values:
    """What one object (the global host, a host, a queue instance) carries, as ``PUT
    /v1/values/...`` writes it: the texts of each kind by attribute name, and the
    consumables' capacities with their bookings."""

    complex_values: dict[str, str]
    load_values: dict[str, str]
    attributes: dict[str, str]
    consumables: dict[str, Consumption]
    #: The worker's own load report (``PUT /v1/workers/{name}/load``), kept apart from the
    #: administrator's ``load_values``; empty from a server that does not tell them apart.
    reported_load_values: dict[str, str] = field(default_factory=dict)
    #: Per attribute, the fields whose values matching sees here (Grid Engine's
    #: within-object rules; an administrator's load value hides the reported one).
    matching_uses: dict[str, list[str]] = field(default_factory=dict)
