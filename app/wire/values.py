"""The Grid Engine values of one object (``GET /v1/values/...``) as the server builds them
and the client reads them: the texts of each kind by attribute name, and each
consumable's capacity with what running jobs book of it."""

from __future__ import annotations

from dataclasses import dataclass


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
