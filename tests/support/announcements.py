"""What a listening process hears of the announcements (app/db/notify.py), on PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine

from app.db import notify


class Heard:
    """The payloads a listener delivered, and a wait for one token among them."""

    def __init__(self) -> None:
        self.payloads: list[str] = []

    def tokens(self) -> list[str]:
        return " ".join(self.payloads).split()

    def wait_for(self, token: str, seconds: float = 10.0) -> bool:
        deadline = time.monotonic() + seconds
        while token not in self.tokens() and time.monotonic() < deadline:
            time.sleep(0.02)
        return token in self.tokens()


@contextmanager
def listening(engine: Engine) -> Iterator[Heard]:
    """A listener of the announcement channel, as every API process has, for the block."""
    heard = Heard()
    listener = notify.PostgresListener(engine, heard.payloads.append)
    listener.start()
    try:
        yield heard
    finally:
        listener.stop()
