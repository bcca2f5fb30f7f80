"""Keeping the service's resident memory near what it actually uses.

Parsing a session allocates millions of small objects that die together when its parsed
state is dropped; the few that live on (cursors, paths) are scattered among them. With
CPython's own allocator (pymalloc, 1 MiB arenas released only when completely empty) those
survivors pin whole arenas, and after indexing 1 GB of sessions the RSS was anywhere between
140 and 540 MB while the live Python objects took under 1 MB (measured with tracemalloc).
With the C allocator (``PYTHONMALLOC=malloc``) and glibc's ``malloc_trim`` after evictions,
the same run ends at 90 to 110 MB. The allocator can only be chosen before the interpreter
starts, so ``pbot-watch run`` re-executes itself once with it set (same pid, same arguments).

Only the service process: its children start with Python's own allocator. The C allocator is
slower for Python's small objects, and raw memory's build workers (``memory/build.py``) make
hundreds of thousands of them per file: inheriting ``PYTHONMALLOC=malloc`` cost them about a
quarter more CPU on a first run over 634 MB, and the first run about 15 % more time. A worker's
garbage dies with each file it builds, so pymalloc's arenas empty again; the warm server's
queries (``service/warm.py``) are short processes that gain the same speed.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

ALLOCATOR_VAR = "PYTHONMALLOC"
CHOSEN_VAR = "PBOT_WATCH_CHOSE_ALLOCATOR"
"""Set beside ``PYTHONMALLOC`` when ``run`` chose it: the re-executed process removes both, so
its children do not inherit the choice. A ``PYTHONMALLOC`` a person set has no such mark and
is passed on."""

_current = os.environ.get(ALLOCATOR_VAR, "pymalloc")
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


def use_system_allocator() -> None:
    """Re-execute this process with ``PYTHONMALLOC=malloc`` unless an allocator was chosen.

    Only where ``malloc_trim`` exists (glibc Linux): elsewhere the switch would not pay off.
    An explicit ``PYTHONMALLOC`` (any value, e.g. ``pymalloc`` or ``debug``) is respected, which
    also guarantees the re-executed process does not do it again. The re-executed process
    takes the variable out of its environment again (``CHOSEN_VAR``): its children are spawned
    with Python's own allocator.
    """
    if os.environ.pop(CHOSEN_VAR, None) is not None:
        os.environ.pop(ALLOCATOR_VAR, None)  # ours, and this process has it: not its children
        return
    if _MALLOC_TRIM is None or ALLOCATOR_VAR in os.environ or not sys.orig_argv:
        return
    os.environ[ALLOCATOR_VAR] = "malloc"
    os.environ[CHOSEN_VAR] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)  # noqa: S606 - the same command, re-executed in place


def current() -> str:
    """The allocator this process runs with: ``malloc`` in the service, whatever its environment says now."""
    return _current
