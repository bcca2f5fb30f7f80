"""Records on disk: atomic writes, where records live, merging with what another writer left.

* ``atomic``: replace a file so a reader sees the old one or the new one, never a torn one.
* ``files``: find a session's existing record; write only what changed.
* ``encode``: a record's JSON after an append, from the pieces of the nodes that did not change.
* ``fresh``: records just written, handed to the search index with the ids of what changed.
* ``marks``: which records on disk are still as this service wrote them, across restarts.
* ``locations``: a workspace's record folder, and which workspaces take records.
* ``legacy``: personal-bot's user-level records moved into their workspaces.
* ``provenance``: which machine and user wrote a record, as labels safe to share.
* ``stamp``: a file's stamp, so a cache knows when to read it again.
"""
