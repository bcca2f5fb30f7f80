"""pbot-watch: a long memory for the Pi coding agent.

The package follows the data flow: ``pi`` (session bytes -> entries), ``history``
(entries -> branches -> exchanges -> node tree -> records), ``archive`` (records on disk),
``search`` (derived index), ``memory`` (raw memory), ``summarize`` (summaries), ``service``
(the watcher), ``tools`` (the queries as model tools), and the edges ``cli`` and ``mcp_server``.
"""

__version__ = "0.1.0"
