"""The distribution: what a wheel carries, and a wheel installed into a fresh venv serving.

The slow test builds the wheel the way a user would (`pip wheel .`, PEP 517 with build
isolation), installs it into a new virtualenv and runs `jobmatch` from an empty directory:
`--version`, `db current` before (no database: it says so) and after `db upgrade`, `demo`,
`scenario run` and `serve` until `/readyz` answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

import app
from app.db import migrate
from tests.live_server import free_port

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_under_app_is_listed_for_the_build() -> None:
    """pyproject lists its packages (discovery cannot map migrations/ to app.migrations),
    so a new package folder under app/ must be added there or the wheel lacks it."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "app").rglob("__init__.py")
    }
    assert on_disk <= listed, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"
    assert {"app.migrations", "app.migrations.versions"} <= listed


def test_the_version_lives_in_app_init_only() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "app.__version__"}
    assert metadata.version("jobmatch") == app.__version__


def test_license_file_is_the_apache_license_that_pyproject_names() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_migrations_are_found_as_the_package_app_migrations() -> None:
    packaged = migrate.packaged_migrations_dir()
    assert packaged is not None and (packaged / "env.py").is_file()
    assert migrate.migrations_dir() == packaged


def test_cli_prints_the_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == f"jobmatch {app.__version__}"


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"jobmatch serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status)
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_serves_from_an_empty_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBMATCH_", "VIRTUAL_ENV"))}
    wheels = tmp_path / "wheels"
    build_log = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(ROOT)],
        tmp_path,
        env,
    )
    # setuptools reports deprecated configuration as warnings during the build.
    assert "Deprecat" not in build_log and "BuildBackendWarning" not in build_log, build_log
    (wheel,) = wheels.glob("jobmatch-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    install += ["--constraint", str(ROOT / "constraints.txt"), str(wheel)]
    _run(install, tmp_path, env)

    empty = tmp_path / "empty"
    empty.mkdir()
    jobmatch = str(venv / "bin" / "jobmatch")
    env["JOBMATCH_DATABASE_URL"] = f"sqlite:///{empty / 'jobmatch.db'}"
    assert _run([jobmatch, "--version"], empty, env).strip() == f"jobmatch {app.__version__}"
    # Before the upgrade there is no database: `db current` says so and creates none.
    before = subprocess.run(
        [jobmatch, "db", "current"], cwd=empty, env=env, capture_output=True, text=True
    )
    assert before.returncode == 3 and "no database file at" in before.stderr, before
    assert not (empty / "jobmatch.db").exists()
    _run([jobmatch, "db", "upgrade"], empty, env)
    assert "(at head)" in _run([jobmatch, "db", "current"], empty, env)
    demo = _run([jobmatch, "demo"], empty, env)
    assert "workers registered" in demo and "dispatch (each worker pulls once)" in demo
    scenarios = empty / "seed.jsonl"
    scenarios.write_bytes((ROOT / "tests" / "scenarios" / "sge" / "seed.jsonl").read_bytes())
    assert " 0 differ" in _run([jobmatch, "scenario", "run", str(scenarios)], empty, env)
    # Nothing of the checkout is used: the code and the migrations come from the venv.
    site = _run([str(python), "-c", "import app; print(app.__file__)"], empty, env)
    assert str(venv) in site and str(ROOT) not in site

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [jobmatch, "serve", "--port", str(port)], cwd=empty, env=env, stdout=out, stderr=out
        )
    try:
        status = _wait_ready(f"http://127.0.0.1:{port}/readyz", server, timeout=60)
        assert status == 200, log.read_text()
        # The console's templates and stylesheet are package data of the wheel.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui/sign-in", timeout=10) as page:
            assert page.status == 200 and 'name="token"' in page.read().decode()
        css = f"http://127.0.0.1:{port}/ui/static/console.css"
        with urllib.request.urlopen(css, timeout=10) as sheet:
            assert sheet.status == 200 and b".reason-fits" in sheet.read()
    finally:
        server.terminate()
        server.wait(timeout=30)
