"""`python -m app.cli`: the `jobmatch` program."""

from app.cli.main import main

main()
