"""The ordering policy (docs/ordering.md): which waiting job a worker takes first, as
rules the pull orders by in SQL, and fair share between submitters (their usage, decayed,
against their shares)."""
