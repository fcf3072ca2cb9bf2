"""What the client and the server share because the wire fixes it: the enumerations whose
values travel in the JSON (a job's state, a worker's state, a token's role, a history
event's kind; `states`), the answer parts the server builds and the client reads field
for field (a job's explanation, a category's request and fit, a what-if's counts, an
object's Grid Engine values; `explanation`, `categories`, `whatif`, `values`), and a
worker's queue instance as the client sends it and the server registers it (`queues`).

Both sides import these, so a value or field added here reaches the server's columns, the
server's answers and the client's models at once (the API's pydantic schemas stay apart:
tests/client/test_coverage.py holds them to the same fields). Standard library only, and
nothing from the rest of `app`: the client and the agent import it without the server (an
import-linter contract in pyproject.toml keeps it so).
"""
