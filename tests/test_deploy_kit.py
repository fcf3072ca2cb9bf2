"""deploy/: the compose file and the systemd unit name only things that exist.

No container engine runs here, so the kit is checked by reading it: the image builds from a
Dockerfile of the project, every environment variable is a jobmatch setting (JOBMATCH_*,
app/settings.py), an environment variable an option of the CLI reads, or one the official
PostgreSQL image documents (https://hub.docker.com/_/postgres, "Environment Variables"),
and every command is a real `jobmatch` subcommand whose options parse.
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from app.agent.main import READS_ENVIRONMENT, build_parser
from app.cli import cli
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"

#: Variables the postgres image's entrypoint reads, as its documentation lists them.
POSTGRES_IMAGE_VARIABLES = frozenset(
    {
        "POSTGRES_PASSWORD",
        "POSTGRES_USER",
        "POSTGRES_DB",
        "POSTGRES_INITDB_ARGS",
        "POSTGRES_INITDB_WALDIR",
        "POSTGRES_HOST_AUTH_METHOD",
        "PGDATA",
        "POSTGRES_PASSWORD_FILE",
        "POSTGRES_USER_FILE",
        "POSTGRES_DB_FILE",
        "POSTGRES_INITDB_ARGS_FILE",
    }
)


def _root_command() -> Any:
    """The click command tree typer builds (typer carries its own click: duck-typed here,
    a group is a command with subcommands)."""
    return typer.main.get_command(cli)


def _is_group(command: Any) -> bool:
    return hasattr(command, "commands")


def _cli_envvars(command: Any) -> set[str]:
    names = {p.envvar for p in command.params if isinstance(p.envvar, str)}
    if _is_group(command):
        for sub in command.commands.values():
            names |= _cli_envvars(sub)
    return names


def _jobmatch_names() -> set[str]:
    settings = {f"JOBMATCH_{name.upper()}" for name in Settings.model_fields}
    return settings | _cli_envvars(_root_command()) | set(READS_ENVIRONMENT)


def assert_jobmatch_command(argv: list[str]) -> None:
    """argv runs `jobmatch SUB... [OPTIONS]`: each word names a subcommand, and the leaf
    command parses the rest (unknown options and bad values fail here)."""
    assert Path(argv[0]).name == "jobmatch", argv
    command = _root_command()
    rest = argv[1:]
    while _is_group(command):
        assert rest and rest[0] in command.commands, f"no jobmatch subcommand {rest[:1]}: {argv}"
        command, rest = command.commands[rest[0]], rest[1:]
    context = command.make_context(command.name or "", list(rest))
    assert not context.args, f"{argv}: left over {context.args}"


def _env_file_names(path: Path) -> set[str]:
    lines = path.read_text().splitlines()
    return {
        line.split("=", 1)[0].strip()
        for line in lines
        if line.strip() and not line.lstrip().startswith("#")
    }


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_compose_builds_the_image_from_the_projects_dockerfile(compose: dict[str, Any]) -> None:
    builds = [s["build"] for s in compose["services"].values() if "build" in s]
    assert builds, "no service builds the jobmatch image"
    for build in builds:
        context = (DEPLOY / build["context"]).resolve()
        assert (context / build.get("dockerfile", "Dockerfile")).is_file()
        assert (context / "pyproject.toml").is_file(), "the build context is not the project"
    images = {s["image"] for s in compose["services"].values() if "build" in s}
    users = {s["image"] for name, s in compose["services"].items() if name != "postgres"}
    assert users == images, "the jobmatch services run another image than the one built"


def test_compose_environment_names_are_real(compose: dict[str, Any]) -> None:
    known = _jobmatch_names()
    for name, service in compose["services"].items():
        names = set(service.get("environment", {}))
        env_files = service.get("env_file", [])
        for env_file in [env_files] if isinstance(env_files, str) else env_files:
            example = DEPLOY / f"{env_file}.example"
            assert example.is_file(), f"{name}: {env_file} has no {example.name} to copy"
            names |= _env_file_names(example)
        allowed = POSTGRES_IMAGE_VARIABLES if service["image"].startswith("postgres") else known
        assert names, f"{name} sets no environment"
        assert names <= allowed, f"{name}: unknown variables {sorted(names - allowed)}"


def test_compose_migrates_in_its_own_step_before_the_server(compose: dict[str, Any]) -> None:
    services = compose["services"]
    migrate, server = services["migrate"], services["jobmatch"]
    assert migrate["command"] == ["jobmatch", "db", "upgrade"]
    assert server["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "--no-migrate" in server["command"]
    assert "/readyz" in " ".join(server["healthcheck"]["test"])
    for service in services.values():
        if "command" in service and not service["image"].startswith("postgres"):
            assert_jobmatch_command(service["command"])


def test_compose_admin_token_comes_from_the_env_file(compose: dict[str, Any]) -> None:
    server = compose["services"]["jobmatch"]
    assert "JOBMATCH_ADMIN_TOKEN" not in server.get("environment", {})
    assert "JOBMATCH_ADMIN_TOKEN" in _env_file_names(DEPLOY / f"{server['env_file']}.example")


def _unit() -> dict[str, dict[str, list[str]]]:
    """A systemd unit's sections and their settings (a key may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in (DEPLOY / "jobmatch-agent.service").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_agent_unit_runs_a_real_jobmatch_agent_command() -> None:
    """The unit starts `jobmatch-agent` (the console script of pyproject.toml), whose
    options parse; the token is read from the environment file, never from an option."""
    service = _unit()["Service"]
    (exec_start,) = service["ExecStart"]
    argv = shlex.split(exec_start)
    assert Path(argv[0]).name == "jobmatch-agent"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["jobmatch-agent"] == "app.agent.main:run"
    build_parser().parse_args(argv[1:])  # unknown options and bad values exit here
    assert "--token" not in argv, "the token belongs in the EnvironmentFile, not the command line"


def test_agent_unit_environment_names_are_real() -> None:
    service = _unit()["Service"]
    names = {value.split("=", 1)[0] for value in service.get("Environment", [])}
    names |= _env_file_names(DEPLOY / "jobmatch-agent.env.example")
    assert "JOBMATCH_WORKER_TOKEN" in names
    assert names <= _jobmatch_names(), sorted(names - _jobmatch_names())
    assert service["EnvironmentFile"], "the worker token comes from an EnvironmentFile"


def test_agent_unit_runs_as_its_own_user_restarts_and_kills_its_jobs() -> None:
    service = _unit()["Service"]
    assert service["User"] != ["root"] and service["User"]
    assert service["Restart"] == ["on-failure"]
    # mixed: SIGTERM to the agent (it has --grace to hand the job back), then SIGKILL to
    # everything left in the unit's control group, the jobs' process groups included.
    assert service["KillMode"] == ["mixed"]
    argv = shlex.split(service["ExecStart"][0])
    grace = float(argv[argv.index("--grace") + 1])
    assert float(service["TimeoutStopSec"][0]) > grace
