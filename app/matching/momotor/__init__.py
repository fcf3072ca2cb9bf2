"""Momotor's rules in SQL: tag definitions as rows for the misfit predicates."""
