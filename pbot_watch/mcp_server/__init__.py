"""``pbot-watch mcp``: the tools (``pbot_watch.tools``) as Model Context Protocol tools, over stdio.

* ``server``: the registry's tools as MCP tool definitions, its answers as MCP results.
* ``stdio``: serving on stdin and stdout until the client closes stdin.

Why the SDK's low-level ``Server`` and not ``MCPServer`` (mcp 2.x's FastMCP): ``MCPServer``
derives each input schema from a Python signature and validates with pydantic's own messages;
our tools bring their own schemas, validation and wording, so this package is only the
transport: list the tools, hand each call to the registry, and turn its answer into MCP.

Every result is returned twice: ``structuredContent`` with the exact JSON of the CLI's
``--json`` (validated by clients against the advertised ``outputSchema``), and the tool's text
rendering for the model. Calls run in a worker thread, one at a time, with the index opened per
call: the server works whether or not the service is running, and a long-lived server never
holds the database open between calls.
"""
