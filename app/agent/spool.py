"""The agent's spool: a directory holding, per job, what the agent must not forget.

An entry is written before the job's command starts (the job's id), completed once the
command runs (its process group and the group leader's start time, with the boot's id)
and replaced by the outcome when the command ends. It is removed only once the server
has the outcome. So an agent that restarts, however it stopped, finds in its spool:

- jobs it left running: it kills what is left of their process groups (only processes
  that really are the job's: same boot, started no earlier than the recorded leader) and
  gives the jobs back to the server, before it pulls anything new;
- outcomes the server may not have (the agent died, or the reply was lost): it sends
  them again; the server answers a repeated report as it answered the first.

Each write goes to a temporary file first and is renamed into place, so an entry is
never half written.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Entries are named job-ID.json; anything else in the directory is left alone.
_PREFIX, _SUFFIX = "job-", ".json"


@dataclass(frozen=True)
class SpoolEntry:
    """One job the agent took. ``outcome`` is None while its command may still run."""

    job: int
    pgid: int | None = None
    started: int | None = None
    boot: str | None = None
    outcome: dict[str, Any] | None = None


class SpoolError(Exception):
    """The spool directory cannot be created or written: the agent must not take jobs
    it could lose track of."""


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:
            raise SpoolError(f"cannot create the spool directory {directory}: {error}") from error

    def _path(self, job: int) -> Path:
        return self.directory / f"{_PREFIX}{job}{_SUFFIX}"

    def write(self, entry: SpoolEntry) -> None:
        path = self._path(entry.job)
        temporary = path.with_suffix(".tmp")
        try:
            with temporary.open("w", encoding="utf-8") as file:
                json.dump(asdict(entry), file)
                file.flush()
                os.fsync(file.fileno())
            temporary.replace(path)
        except OSError as error:
            raise SpoolError(f"cannot write {path}: {error}") from error

    def remove(self, job: int) -> None:
        self._path(job).unlink(missing_ok=True)

    def entries(self) -> list[SpoolEntry]:
        """Every entry, oldest job first; unreadable ones are skipped (and kept)."""
        found = []
        for path in self.directory.glob(f"{_PREFIX}*{_SUFFIX}"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                found.append(SpoolEntry(**data))
            except (OSError, ValueError, TypeError):
                continue
        return sorted(found, key=lambda entry: entry.job)
