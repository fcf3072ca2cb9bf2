"""Scenario files (`jobmatch scenario run`): cases of every family, each a cluster, jobs
and what should happen, run through the services the API calls on a scratch database.

``cases`` reads the JSON-lines files and keeps the scratch databases, ``compare`` says
where an outcome departs from its ``expected``, ``bodies`` turns the API's request bodies
into the services' specs, ``families`` runs the Momotor, Flux and debusine cases, and
``run`` picks each case's family (Grid Engine cases go to
``app.matching.gridengine.scenarios``).
"""
