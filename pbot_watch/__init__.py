"""pbot-watch: a long memory for the Pi coding agent.

The package follows the data flow: ``pi`` (session bytes -> entries), ``history``
(entries -> branches -> exchanges -> node tree -> records), ``archive`` (records on disk),
``search`` (derived index), ``summarize`` (summaries), ``service`` (the watcher), and the
edges ``cli`` and ``mcp_server``.
"""

__version__ = "0.1.0"
