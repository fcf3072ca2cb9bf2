"""debusine's rules: the task registry, worker metadata rows, and task requirements as SQL
predicates over them."""
