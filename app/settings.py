"""Runtime configuration, read from the environment (prefix ``JOBMATCH_``) and ``.env``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.wire.ordering import parse_ordering


class Settings(BaseSettings):
    """Everything an operator can set; each field maps to ``JOBMATCH_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="JOBMATCH_", env_file=".env", extra="ignore")

    #: SQLAlchemy URL. SQLite is the embedded default; use
    #: ``postgresql+psycopg://user@host:5432/dbname`` for a real deployment.
    database_url: str = "sqlite:///./jobmatch.db"
    #: Connections each server process keeps open to PostgreSQL (opened as the load asks,
    #: then kept), and how many more it may open for a moment under load, each closed as
    #: soon as it comes back to a full pool (SQLAlchemy's pool_size and max_overflow). No
    #: overflow by default: a connection opened and closed per request made PostgreSQL
    #: fork sessions all the time at 10,000 workers (docs/operations.md).
    db_pool_size: int = Field(default=20, ge=1)
    db_max_overflow: int = Field(default=0, ge=0)
    #: ``pgbouncer`` when a pooler in transaction mode stands in front of PostgreSQL: no
    #: prepared statements, no startup options, JIT turned off per transaction, and LISTEN
    #: only on ``database_listen_url`` (docs/operations.md).
    db_pooler: Literal["none", "pgbouncer"] = "none"
    #: Whether psycopg prepares statements it runs often; unset: yes unless behind a pooler.
    db_prepared_statements: bool | None = None
    #: A direct URL to the same PostgreSQL database for the LISTEN connections (long-poll
    #: wake-ups, token revocations) when ``database_url`` goes through a pooler.
    database_listen_url: str | None = None
    #: Bearer token with the admin role. Unset means no admin access over HTTP at all.
    admin_token: SecretStr | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: ``json`` for machines (production), ``text`` for people at a terminal.
    log_format: Literal["json", "text"] = "json"
    #: Answer /metrics only to a caller with a valid token (any role). Off by default:
    #: anyone who reaches the server can read its job counts by state and its cluster size.
    metrics_require_token: bool = False
    #: Seconds within which a token's recorded last use is exact: each process writes a
    #: token's ``last_used_at`` at most once per this interval (0: on every request).
    token_last_use_seconds: float = Field(default=300.0, ge=0)
    #: Requests a second each token may make on average, in all the server processes
    #: together (each keeps its share: app/api/rate_limits.py); one over is
    #: answered 429 with Retry-After (app/api/rate_limits.py). 0: no limit.
    rate_limit_per_second: float = Field(default=0.0, ge=0)
    #: Requests a token may make at once after a quiet spell (the bucket's size).
    rate_limit_burst: int = Field(default=20, ge=1)
    #: Count long-poll pulls (``?wait=`` above 0) against the limit too; off, they pass.
    rate_limit_long_poll: bool = False
    #: Where the Alembic tree lives; found next to the source or in the working directory
    #: when unset.
    migrations_dir: Path | None = None
    #: A running job belongs to its worker while the worker was heard from (pull, finish,
    #: heartbeat) within this many seconds; past it the job is requeued.
    lease_seconds: float = 300.0
    #: A job whose lease expired this many times fails instead of being requeued again.
    max_attempts: int = 3
    #: How often the server looks for expired leases and silent workers (0 disables the
    #: background sweep). It sweeps at least twice per ``worker_timeout_seconds``, so that a
    #: silent worker is marked within one and a half timeouts whatever this says.
    lease_sweep_seconds: float = 30.0
    #: A worker not heard from (pull, finish, return, heartbeat, load or metadata report)
    #: for this many seconds since its last word, or since its registration if it never
    #: spoke, is shown as ``unknown`` and gets no new work until it speaks again (0: never).
    #: 600 is ten of the agent's load reports (every 60 s; app/agent/main.py) and twenty
    #: of its long-poll pulls (30 s): a live agent speaks many times within it, and a
    #: server that loses touch with one for ten minutes had better stop sending it work.
    #: It is longer than ``lease_seconds`` (300), so a silent worker's running jobs have
    #: gone back to waiting by the time it is marked; marking takes no lease either way.
    worker_timeout_seconds: float = Field(default=600.0, ge=0)
    #: Seconds a SQLite connection waits for a lock before it reports the database busy.
    sqlite_busy_timeout: float = 30.0
    #: Runs of a request's transaction when it loses a race with another one (deadlock,
    #: serialization failure, SQLite lock wait); 1 disables the server-side retry.
    transaction_attempts: int = Field(default=5, ge=1)
    #: Seconds after which a worker's dynamic metadata is old enough that the pull and
    #: heartbeat responses ask it to report again (debusine issue #8: every 24 hours).
    metadata_refresh_seconds: float = 86_400.0
    #: How jobs with a jobspec get vertices: ``first`` (lowest ranks and ids first) or
    #: ``pack`` (partly used nodes and vertices before empty ones).
    allocation_policy: Literal["first", "pack"] = "first"
    #: Largest worker metadata (static or one dynamic report) in bytes of compact JSON.
    metadata_max_bytes: int = Field(default=65_536, ge=1)
    #: Most keys in worker metadata (static or one dynamic report), counted at any depth.
    metadata_max_keys: int = Field(default=256, ge=1)
    #: Characters of a running job's streamed output the server keeps (the tail); offsets
    #: stay absolute, so a reader learns how much it missed.
    output_tail_chars: int = Field(default=1024 * 1024, ge=1)

    # Request limits (issue 19): each bounds what one client can make the server hold
    # before it has proved anything; `jobmatch serve` options override them.
    #: Largest request body accepted, in bytes; a larger one is answered 413 before it is
    #: read (a declared Content-Length up front, a chunked body as soon as it passes this).
    max_body_bytes: int = Field(default=1024 * 1024, ge=0)
    #: Seconds a connection may take to send a request's headers (from the moment it is
    #: accepted, or from the first byte of a later request on it) before it is closed.
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Seconds a request may take to send its whole body once the headers are in; past it
    #: the request is answered 408 and the connection closed.
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    #: Seconds an idle keep-alive connection is kept open between requests.
    keep_alive_seconds: int = Field(default=5, ge=1)
    #: Open connections per server process that are not waiting pulls (ordinary requests,
    #: idle keep-alive connections); an ordinary request arriving while this many are open
    #: is answered 503 problem+json with Retry-After. Probes and the admin token pass.
    max_connections: int = Field(default=1000, ge=1)
    #: Pulls waiting for work (``?wait=``) per server process; unset: what the open-files
    #: limit leaves after max_connections and a reserve (app/api/capacity.py). A pull of a
    #: worker with none waiting is answered 503 beyond it.
    max_waiting_pulls: int | None = Field(default=None, ge=0)
    #: Server processes serving together (``jobmatch serve --workers``, which sets it):
    #: each process's rate limit is the limit divided by it (app/api/rate_limits.py).
    server_processes: int = Field(default=1, ge=1)
    #: Where the server listens (``jobmatch serve``, which binds the socket, sets it):
    #: each server process logs "listening on" it when it starts. Unset, nothing is logged.
    listen_url: str | None = None
    #: Most worker items (added, changed, drained and removed together) in one what-if
    #: (POST /v1/whatif); a larger change set is a 422 before any work.
    whatif_max_workers: int = Field(default=100, ge=0)
    #: Most jobs one what-if may add.
    whatif_max_jobs: int = Field(default=1000, ge=0)
    #: Seconds the demand figures of /metrics (``jobmatch_demand_*``) and of
    #: ``GET /v1/demand/scale`` are kept per server process before a request recomputes
    #: them in the background (app/api/demand_gauges.py); 0: no demand in /metrics, and
    #: the scale endpoint computes each answer when asked. Off by default: every scrape
    #: of /metrics would otherwise keep a farm's demand computed (some 12 s of a
    #: process's CPU each time at 10,000 workers and 500 categories, bench/demand.py),
    #: whether or not an autoscaler reads it.
    demand_metrics_seconds: float = Field(default=0.0, ge=0)
    #: Most job bodies in one bulk submission (POST /v1/jobs/bulk); more is a 422.
    max_bulk_jobs: int = Field(default=1000, ge=1)
    #: Most jobs one bulk submission may store, an array's tasks each counted (qsub -t
    #: 1-100000 is 100,000 jobs); more is a 422 before anything is stored.
    max_bulk_tasks: int = Field(default=100_000, ge=1)
    #: Connections the kernel queues for the process before it accepts them (listen backlog).
    backlog: int = Field(default=2048, ge=1)
    #: Which waiting job a worker takes first: rules, best first, of ``priority``,
    #: ``fair-share`` and ``age`` (docs/ordering.md). The default is debusine's order;
    #: ``fair-share,priority,age`` gives the submitter furthest below its share first.
    ordering: str = "priority,age"
    #: Seconds in which a submitter's booked usage decays to half (HTCondor's
    #: PRIORITY_HALFLIFE, Slurm's PriorityDecayHalfLife; both default to a day).
    fair_share_halflife_seconds: float = Field(default=86_400.0, gt=0)

    @field_validator("ordering")
    @classmethod
    def _known_rules(cls, value: str) -> str:
        """Refuse an unknown or repeated rule at start, naming it (a ValueError here is
        pydantic's validation error, which the server prints before it serves)."""
        return ",".join(parse_ordering(value))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
