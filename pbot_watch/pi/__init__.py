"""Pi session files in, entries out. Pure: nothing here opens a file.

* ``lines``: a growing byte stream split into complete JSONL lines.
* ``jsonline``: one line to a value, as Pi's ``JSON.parse`` sees it.
* ``entries``: what Pi writes, and the reader that turns lines into entries.
* ``branch``: the current branch: Pi's leaf rule and its ``getBranch`` walk.
* ``cursor``: how far a file has been read, and what to do when it changed.
* ``untrusted``: the one rule for names from outside (ids, cwds, file names).
"""
