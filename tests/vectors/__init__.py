"""Test vectors kept inside the project: JSON lines whose ``source`` field names the upstream
file each fact was taken from (see ``tests/vectors/README.md``)."""

from pathlib import Path

#: The folder of this package; ``VECTORS / "flux"`` and ``VECTORS / "sge"`` hold the files.
VECTORS = Path(__file__).resolve().parent
FLUX = VECTORS / "flux"
SGE = VECTORS / "sge"
