"""What the client and the server share because the wire fixes it: the enumerations whose
values travel in the JSON (a job's state, a worker's state, a token's role, a history
event's kind).

Both sides import these, so a value added here reaches the server's columns, the API's
schemas and the client's models at once. Standard library only, and nothing from the rest
of `app`: the client and the agent import it without the server (an import-linter
contract in pyproject.toml keeps it so).
"""
