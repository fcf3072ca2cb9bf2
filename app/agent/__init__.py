"""The worker agent: a process on a worker host that talks to jobmatch over HTTP only."""
