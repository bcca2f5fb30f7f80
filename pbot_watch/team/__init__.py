"""The team index: records of allowed workspaces pushed into PostgreSQL, searched by a team.

Optional and off by default (``[team]`` in the settings). The package is split as the rest of
pbot-watch is: ``rows`` is pure (a record in, the rows it gives out), ``schema`` holds the
numbered migrations, ``push`` and ``search`` are the shell that talks to the server, and
``listener`` is what the service runs. Raw memory (``team.raw_memory``) has the same three
parts: ``memory_rows`` (pure), ``memory_push`` (called by the records' pusher) and
``memory_search``. Only these modules import psycopg (the ``team`` extra),
so an install without it loses nothing else. Beside them: ``settings`` (``[team]``), ``dsn``
(where the DSN is read from, never shown), ``gate`` (the fail-closed redaction gate),
``access`` (opening the index for a command), ``ask`` (one question, for ``--team`` and the
tools' team scope), ``tallies`` (exact totals of common queries, kept by the server) and ``start`` (starting the pusher inside the service).
"""
