"""Fixtures of the hostile suite: the issue 19 agent probes' live server and agents."""

from tests.support.agent_probes import agents, short_lease_server

__all__ = ["agents", "short_lease_server"]
