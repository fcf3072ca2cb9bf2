"""Demand (issue 40): what the waiting jobs need, in the terms an autoscaler acts on.

``waiting.py`` reads the waiting work by category in one statement; ``answers.py`` says
why each category waits (never, capacity, policy, ready) from the misfit cache and the
pull's own decision; ``need.py`` what starting all of it would take; ``templates.py``
keeps the worker templates; ``simulate.py`` registers new workers of a template in a
savepoint and asks the real services what they would start; ``packing.py`` packs the
jobs onto them; ``report.py`` puts the answer together.
"""
