"""Where `jobmatch serve` listens: its socket is bound first, before the database is
migrated or a line is logged, so that a taken port is one `error:` line and a non-zero exit
instead of a start-up that fails half-way with uvicorn's "address already in use" (and,
under `make run`, after a banner that said it was serving).

`make run` asks the same question (:func:`main`) before it prints its banner.
"""

from __future__ import annotations

import errno
import socket
import sys

from app.cli.errors import CommandError, ExitCode


def listen_url(host: str, port: int) -> str:
    """The URL a client uses for a server on ``host``:``port`` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def bind_listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port``, ready to hand to uvicorn (inheritable, for
    the worker processes of ``--workers N``).

    Raises CommandError (exit code 2) saying why the address cannot be had: a taken port
    names the ways to choose another.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As uvicorn binds: a port whose last connections linger in TIME_WAIT is free again.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise CommandError(_why_not(host, port, error), ExitCode.USAGE) from error
    except OverflowError as error:  # a port beyond 65535
        sock.close()
        raise CommandError(
            f"cannot listen on {listen_url(host, port)}: a TCP port is 0 to 65535",
            ExitCode.USAGE,
        ) from error
    sock.set_inheritable(True)
    return sock


def _why_not(host: str, port: int, error: OSError) -> str:
    where = listen_url(host, port)
    if error.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the port is taken (another server is running "
            "there?); stop it, or choose another port (jobmatch serve --port N, "
            "make run PORT=N)"
        )
    if error.errno == errno.EACCES:
        return f"cannot listen on {where}: permission denied (ports below 1024 need root)"
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host!r} is not an address of this machine"
    return f"cannot listen on {where}: {error.strerror or error}"


def check_can_listen(host: str, port: int) -> None:
    """Bind and release ``host``:``port``; raise CommandError when it cannot be had."""
    bind_listening_socket(host, port).close()


def main(argv: list[str]) -> int:
    """`python -m app.cli.listening HOST PORT`: exit 0 when a server could listen there,
    else print one `error:` line and exit 2 (`make run` runs this before its banner)."""
    host, port = argv
    try:
        check_can_listen(host, int(port))
    except CommandError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return int(error.code)
    except ValueError:
        print(f"error: the port must be a number, not {port!r}", file=sys.stderr)
        return int(ExitCode.USAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
