"""The admin client's queue instance and scheduler calls against a real `jobmatch serve`:
``qmod -d``/``-e`` and a per-host seq_no through QueueInstancePatch (NULL gives the queue's
back), the scheduler configuration set, refused with the server's notation error, reset."""

from __future__ import annotations

import pytest

from app.client import NULL, AdminClient, QueueInstancePatch, ValidationFailed, WorkerSpec
from app.wire.queues import QueueSpec
from tests.live_server import LiveServer


def test_queue_instance_states_and_own_values(server: LiveServer, admin: AdminClient) -> None:
    admin.register_worker(WorkerSpec(name="h1", queues=[QueueSpec("all.q", 2)]))
    disabled = admin.update_queue_instance("all.q", "h1", QueueInstancePatch(disabled=True))
    assert (disabled.name, disabled.disabled, disabled.suspended) == ("all.q@h1", True, False)
    admin.configure_queue("all.q", seq_no=4)
    own = admin.update_queue_instance("all.q", "h1", QueueInstancePatch(seq_no=1))
    assert (own.own_seq_no, own.seq_no, own.disabled) == (1, 1, True)
    back = admin.update_queue_instance(
        "all.q", "h1", QueueInstancePatch(seq_no=NULL, disabled=False)
    )
    assert (back.own_seq_no, back.seq_no, back.disabled) == (None, 4, False)
    assert admin.get_queue_instance("all.q", "h1") == back


def test_scheduler_configuration(server: LiveServer, admin: AdminClient) -> None:
    assert admin.get_scheduler().configured is False
    with pytest.raises(ValidationFailed) as caught:
        admin.configure_scheduler("load", "np_load_avg+")
    assert caught.value.errors[0].position == 12
    stored = admin.configure_scheduler("seqno", "np_load_avg*2")
    assert (stored.configured, stored.queue_sort_method, stored.load_formula) == (
        True,
        "seqno",
        "np_load_avg*2",
    )
    assert admin.reset_scheduler().configured is False
