"""Test vectors kept inside the project: JSON lines whose ``source`` field names the upstream
file each fact was taken from (see ``tests/vectors/README.md``)."""

import json
from pathlib import Path
from typing import Any

#: The folder of this package; ``VECTORS / "flux"`` and ``VECTORS / "sge"`` hold the files.
VECTORS = Path(__file__).resolve().parent
FLUX = VECTORS / "flux"
SGE = VECTORS / "sge"


def sge_rows(name: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of the Grid Engine vector file ``name``, each with its 1-based line
    number (test ids name the line a failing case came from)."""
    lines = (SGE / name).read_text(encoding="utf-8").splitlines()
    return [(number, json.loads(line)) for number, line in enumerate(lines, 1) if line.strip()]
