"""Raw HTTP/1.1 over a socket, for tests that must control what a client sends and when:
headers without a body, a body streamed while the answer is read, headers never finished.
http.client sends the whole body before it reads anything, which is what these tests must
not do.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request_head(
    method: str, path: str, headers: dict[str, str], *, token: str | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_array_of_empty_objects(size: int) -> Iterator[bytes]:
    """``[{},{},...,{}]`` in pieces, exactly ``size`` bytes (size = 4 + 3k): the body of
    issue 19's probe, cheap to send and costly to parse."""
    assert (size - 4) % 3 == 0
    left = (size - 4) // 3
    yield b"["
    while left:
        count = min(left, 20_000)
        left -= count
        yield b"{}," * count
    yield b"{}]"


def chunked(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The pieces in HTTP/1.1 chunked transfer coding (RFC 9112 section 7.1)."""
    for piece in pieces:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def read_response(connection: socket.socket) -> RawResponse:
    """One response: its head, then a body of its Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        received = connection.recv(65536)
        if not received:
            raise ConnectionError(f"closed before a whole response head: {data!r}")
        data += received
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        received = connection.recv(65536)
        if not received:
            break
        body += received
    return RawResponse(int(status_line.split()[1]), headers, body[:length])


def exchange(
    port: int, head: bytes, body: Iterable[bytes] = (), *, timeout: float = 30.0
) -> RawResponse:
    """Send the head, stream the body from a thread, and read the answer meanwhile: the
    server may answer (and close) before the body is sent, as a limit should make it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        connection.sendall(head)

        def feed() -> None:
            try:
                for piece in body:
                    connection.sendall(piece)
            except OSError:
                pass  # the server answered and closed: the rest is not wanted

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        response = read_response(connection)
    feeder.join(timeout=timeout)
    return response


def resident_megabytes(pid: int) -> float:
    """The process's resident set size (VmRSS in /proc/PID/status), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")
