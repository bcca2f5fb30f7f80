"""pi-echo's raw memory: every message of a branch as recallable sources, and the memory cues.

``extract`` (entries -> sources, pure), ``handles`` (opaque handles and cursors, pure),
``index`` (the memory tables in ``search.db``), ``query`` (``search_memory``, ``recall``).
"""
