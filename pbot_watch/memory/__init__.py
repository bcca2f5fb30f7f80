"""pi-echo's raw memory: every message of a branch as recallable sources, and the memory cues.

Raw memory:

* ``extract``: entries -> sources, line-numbered source text (pure).
* ``texts``: how a source's text is kept, and what the FTS tables index (pure).
* ``ranking``: the terms search's BM25 over a positionless index (pure).
* ``handles``: opaque handles and memory-search cursors (pure).
* ``index``: the memory tables in ``search.db``, kept in step with the session files.
* ``listener``: the service's side: raw memory from the entries it parses anyway.
* ``build``: whole files' raw memory made in a worker process, stored by the service.
* ``query``: ``search_memory`` and ``recall``; ``models``: their JSON shapes and the cues'.
* ``tally``: exact totals of common literal needles, kept by the writer as texts become visible.
* ``rankings``: the rankings of unscoped terms searches, kept until raw memory changes.
* ``stamps``: a source's timestamp as a small integer key that orders as its text does (pure).

Memory cues:

* ``branch``: what a branch's compactions took out of the model's context (pure).
* ``cues``: the short, fading list of that tool work (pure), replayed from a compact ``CueLedger``.
* ``cue_follow``: the ledgers of the session files a process is asked about, read as they grow and saved.
* ``cue_listener``: the service's side: the ledgers of big files from the entries it parses anyway.
* ``cue_text``: how one cue line reads (pure); ``cue_tokens``: what the block costs, in tokens.
"""
