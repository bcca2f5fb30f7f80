"""The team index: records of allowed workspaces pushed into PostgreSQL, searched by a team.

Optional and off by default (``[team]`` in the settings). The package is split as the rest of
pbot-watch is: ``rows`` is pure (a record in, the rows it gives out), ``schema`` holds the
numbered migrations, ``push`` and ``search`` are the shell that talks to the server, and
``listener`` is what the service runs. Only these modules import psycopg (the ``team`` extra),
so an install without it loses nothing else.
"""
