"""The derived search index over the archive (and over raw Pi sessions), and its queries.

Nothing here is a source of truth: every table can be rebuilt from the record files and the
session files alone. Importing this package must stay light (no litellm, no watchdog).

* ``database``: ``search.db``'s one owner: opening it, both table families' versions, damage.
* ``index``: the index in SQLite FTS5 (``search.db``); ``held``: the index as a long-lived
  process holds it; ``codec``: how its texts and raw memory's are kept compressed.
* ``listener``: the service keeps the index current from each record it writes.
* ``pages``: how much one page of each query may hold, for every edge.
* ``discover``: which record folders a query must look at.
* ``queries``: search and read with personal-bot 0.2.3's semantics; ``literal``: which nodes hold
  a literal needle; ``tallies``: the rows holding common needles, kept by the writers (raw memory's
  too); ``ranking``: how ``terms`` search orders hits; ``pools``: the best nodes of a common term,
  remembered.
* ``tokens``, ``terms``, ``unicode_classes``: what a word is, and the ranking terms.
* ``dates``, ``when``: the times a query names; ``session_ids``: a session id as a person types it.
* ``models``: the JSON shapes of search and read (memory's are in ``memory.models``).
* ``errors``: what a query can get wrong, as types; ``render``: helpers for human output.
"""
