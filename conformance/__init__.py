"""Conformance harnesses: jobmatch refereed by the real systems it models."""
