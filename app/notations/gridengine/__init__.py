"""Grid Engine's notations: the complex attribute table, ``-l`` requests, string values and
their patterns, and the reference evaluator that decides a request against host values."""
