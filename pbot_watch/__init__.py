"""pbot-watch: a long memory for the Pi coding agent.

The packages follow the data flow (``docs/architecture.md`` draws it):

* ``pi``: session bytes -> entries (pure); ``sources``: Pi files in (where sessions are, their
  headers, opening them with the guard); ``catalog``: which sessions, workspaces and record
  folders there are, and which include/exclude leave in.
* ``history``: entries -> branches -> exchanges -> node tree -> records (pure).
* ``indexer``: the one pipeline from a file's new bytes to its record on disk.
* ``archive``: records on disk (atomic writes, where they live).
* ``search``: the derived index over records, and its queries; ``memory``: raw memory (pi-echo)
  and its cues; ``query``: one way to run a query against the index.
* ``summarize``: summaries of history nodes; ``team``: the optional PostgreSQL team index.
* ``service``: the watcher (``pbot-watch run``) and its status.
* ``tools``: the queries as model tools; the edges ``cli``, ``mcp_server`` and ``pi_bridge``
  (with the Pi package in ``pi_package``); ``prefork``: the console script itself, which hands a
  query to the service's warm server, forked from a process that has imported the query commands.

Shared by all: ``config`` and ``config_paths`` (settings and where they live), ``errors`` (the
one error root), ``redact`` (the one redaction step), ``sqlite`` (SQLite opened one way),
``display`` (what a reader sees), ``shorten`` (the one rule for cutting a text to fit), ``log`` (structlog), ``launcher`` (how another program starts
this pbot-watch), ``installer`` (the one shape of the service and Pi package installers), ``__main__`` (``python -m pbot_watch``). Data files: ``prompts`` (the summary
prompt), ``templates`` (the systemd unit and launchd agent).
"""

__version__ = "0.1.0"
