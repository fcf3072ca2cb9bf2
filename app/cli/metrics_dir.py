"""Where the processes of `jobmatch serve` count their metrics together.

prometheus-client counts in files when PROMETHEUS_MULTIPROC_DIR is set at the moment it is
first imported, in every process: so the server sets it before it imports anything that
imports prometheus-client, and the worker processes (--workers N) inherit it. Standard
library only, for that reason.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

#: The variable prometheus-client reads (app/metrics.py names it too).
VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def empty_directory(directory: Path) -> None:
    """Make the directory, or empty it: files left by an earlier run would be added to
    this run's counts (prometheus-client asks for the directory to be wiped between runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def set_up() -> Path:
    """The operator's PROMETHEUS_MULTIPROC_DIR emptied, or a new temporary directory that
    is removed when the server exits; exported for this process and its workers."""
    configured = os.environ.get(VARIABLE)
    if configured:
        directory = Path(configured)
        empty_directory(directory)
    else:
        directory = Path(tempfile.mkdtemp(prefix="jobmatch-metrics-"))
        atexit.register(shutil.rmtree, directory, True)
    os.environ[VARIABLE] = str(directory)
    return directory
