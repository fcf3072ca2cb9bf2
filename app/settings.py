"""Runtime configuration, read from the environment (prefix ``JOBMATCH_``) and ``.env``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything an operator can set; each field maps to ``JOBMATCH_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="JOBMATCH_", env_file=".env", extra="ignore")

    #: SQLAlchemy URL. SQLite is the embedded default; use
    #: ``postgresql+psycopg://user@host:5432/dbname`` for a real deployment.
    database_url: str = "sqlite:///./jobmatch.db"
    #: Bearer token with the admin role. Unset means no admin access over HTTP at all.
    admin_token: SecretStr | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: ``json`` for machines (production), ``text`` for people at a terminal.
    log_format: Literal["json", "text"] = "json"
    #: Where the Alembic tree lives; found next to the source or in the working directory
    #: when unset.
    migrations_dir: Path | None = None
    #: Seconds a SQLite connection waits for a lock before it reports the database busy.
    sqlite_busy_timeout: float = 30.0
    #: How jobs with a jobspec get vertices: ``first`` (lowest ranks and ids first) or
    #: ``pack`` (partly used nodes and vertices before empty ones).
    allocation_policy: Literal["first", "pack"] = "first"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
