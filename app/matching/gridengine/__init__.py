"""Grid Engine's rules: the complex attribute table and values, ``-l`` requests as rows and
SQL predicates, the dynamic fit and bookings, parallel environments, the Grid Engine pull,
the scheduling run and the scenario runner."""
