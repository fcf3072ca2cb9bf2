"""Flux's rules in SQL: RFC 31 constraints and RFC 14 resource lists as rows and predicates,
and the stateless Flux tools served over HTTP and the CLI."""
