"""Size limits on what a client stores, checked in the route before the service runs.

Worker metadata is free-form JSON; without a bound a worker or an admin could store 10 MB
and 10,000 keys per worker (issue 19), which every pull then reads back. The limits are
settings (``JOBMATCH_METADATA_MAX_BYTES``, ``JOBMATCH_METADATA_MAX_KEYS``) so that a site
with rich metadata can raise them.
"""

from __future__ import annotations

import json
from typing import Any

from app.matching.errors import InvalidFieldError
from app.settings import Settings


def _count_keys(value: Any) -> int:
    """Keys of every object, at any depth (lists are walked, not counted)."""
    if isinstance(value, dict):
        return len(value) + sum(_count_keys(item) for item in value.values())
    if isinstance(value, list):
        return sum(_count_keys(item) for item in value)
    return 0


def check_metadata_size(metadata: Any, settings: Settings, field: str = "metadata") -> None:
    """Refuse metadata with more keys or more bytes (compact UTF-8 JSON) than allowed."""
    keys = _count_keys(metadata)
    if keys > settings.metadata_max_keys:
        raise InvalidFieldError(
            field, f"{keys} keys; at most {settings.metadata_max_keys} are allowed"
        )
    size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
    if size > settings.metadata_max_bytes:
        raise InvalidFieldError(
            field, f"{size} bytes as JSON; at most {settings.metadata_max_bytes} are allowed"
        )
