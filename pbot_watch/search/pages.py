"""How much one page of each query may hold: the numbers every edge of the queries shares.

They are personal-bot 0.2.3's (history search and read) and pi-echo's (memory search) limits.
The tools' argument models state them as Field constraints (``pbot_watch.tools.arguments``), and
every edge reads them from there: the command line's options, the MCP and Pi tool schemas, and
the Pi extension (through the ``pbot-watch.json`` that ``pbot-watch pi install`` writes). The
query functions check them too, for callers that skip the models; so the numbers live here,
below both, where neither has to import the other. Importing this module costs nothing.
"""

from __future__ import annotations

DEFAULT_SEARCH_LIMIT = 20
"""History matches per page when the caller does not say."""
MAX_SEARCH_LIMIT = 50
DEFAULT_READ_LIMIT = 12_000
"""UTF-16 units of a node's text per page when the caller does not say."""
MAX_READ_LIMIT = 24_000
CHILDREN_PAGE = 20
"""A node's children listed per page (not chosen by the caller)."""
MEMORY_PAGE = 20
"""Raw memory hits per page when the caller does not say."""
MAX_MEMORY_PAGE = 50
