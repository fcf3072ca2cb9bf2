"""Real ``jobmatch.tasks`` entry points for tests: a module and a ``.dist-info`` directory
written under a directory that goes on ``sys.path`` (or a subprocess's PYTHONPATH), which is
where importlib.metadata finds installed distributions."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path


def install_plugins(directory: Path, plugins: dict[str, str]) -> None:
    """Install entry points ``name -> module:Plugin`` whose module source is given."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = f"jobmatch_test_plugins_{uuid.uuid4().hex[:8]}"
    info = directory / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = ["[jobmatch.tasks]"]
    for name, source in plugins.items():
        module = f"{dist}_{name.replace('-', '_').replace('.', '_')}"
        (directory / f"{module}.py").write_text(textwrap.dedent(source))
        lines.append(f"{name} = {module}:Plugin")
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
