"""The tools a model calls: history search and read, raw memory search and recall.

Each tool is one module holding its spec (name, title, description, the result model), its run
function and the text a model reads; its arguments are a pydantic model in ``arguments``, which
the command line's options of the same query are made from too. ``registry`` lists them and runs one by name; it knows nothing of the transport, so the
MCP server (``pbot_watch.mcp_server``) and any other caller (the Pi extension's child process)
offer the same tools with the same schemas, texts and errors.

* ``history_search``, ``history_read``, ``search_memory``, ``recall_memory``: the four tools.
* ``arguments``: each query's parameters, declared once (the tools' argument models).
* ``base``: what every tool is made of; ``registry``: the tools by name, and one way to call one.
* ``catch_up``: bringing records up to date when the service is not running.
* ``errors``: errors worded for a model; ``text``: what every tool's text says first.
"""
