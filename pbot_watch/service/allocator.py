"""Handing freed heap back to the system, and which allocator the service runs with.

The service runs with CPython's own allocator (pymalloc). It used to re-execute itself with
``PYTHONMALLOC=malloc`` at start: in November, after indexing 1 GB of sessions
(``bench/watch_latency.py --only memory --gb 1``) its RSS had varied between 106 and 543 MB
with pymalloc, whose 1 MiB arenas are released only when empty, and ended near 60 to 110 MB
with the C allocator and ``malloc_trim``. The service has changed since (parsed state dropped
as records are written, summaries that keep no records, raw memory built in worker processes),
and measured again the C allocator was slower and peaked higher, its end varying more:

* the same bench, three runs each: pymalloc peaked at 238-239 MB and ended at 221-231 MB,
  malloc peaked at 261-273 MB and ended at 169-246 MB; pymalloc indexed in 53-55 s, malloc in
  65-68 s;
* a first run over 634 MB (``bench/first_run.py``'s corpus): the reading thread took 12.8 s of
  CPU with pymalloc and 20.2 s with malloc (the same parse takes 7.5 s and 9.3 s in the one-shot
  ``index``: the C allocator is slower still in a process with more threads and a larger heap),
  and the run caught up in 67.5 s instead of 75.5 s, peaking at 137 and 140 MB.

``malloc_trim`` still pays: objects over 512 bytes (a file's pieces, record JSON, SQLite's
pages) come from the C allocator under pymalloc too, and the service trims after dropping
parsed sessions. ``PYTHONMALLOC`` set by the person is respected, as by any Python program.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

_current = os.environ.get("PYTHONMALLOC", "pymalloc")
"""The allocator this interpreter started with (the variable is read once, at start)."""


def _load_malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl and other libcs have no malloc_trim
        return None
    return trim


_MALLOC_TRIM = _load_malloc_trim()


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc only; elsewhere nothing to do)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def current() -> str:
    """The allocator this process started with (``PYTHONMALLOC`` as the interpreter read it)."""
    return _current
