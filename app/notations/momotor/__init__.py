"""Momotor's notations: requirement and capability tags, and their typed value groups."""
