"""Dispatch: a worker's pull (the best waiting job it can run, booked in one transaction),
and the end of a job that frees what it held. PostgreSQL-only statements end in ``_pg``."""
