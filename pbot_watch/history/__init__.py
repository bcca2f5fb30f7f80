"""Entries in, records out: branches, exchanges and the 4-ary node tree. Pure, no I/O.

* ``tree``: the entry tree of one session file and its branches, kept up to date entry by entry.
* ``exchanges``: branches into question/answer exchanges (personal-bot 0.2.3's ``exchanges()``).
* ``nodes``: the 4-ary node tree (personal-bot 0.2.3's ``indexHistory()``).
* ``project``: a file's state as it grows, projected to ``SessionHistory``.
* ``record``: the archive contract, the record file personal-bot 0.2.3 reads and writes.
* ``resume``: a file's parsed state as compact bytes, to go on reading it without re-parsing.
* ``jstext``: the JavaScript string behaviours personal-bot's output depends on.
"""
