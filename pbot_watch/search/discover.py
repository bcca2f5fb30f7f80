"""Which record folders a query must look at, found cheaply, with or without the service.

The catalog (``pbot_watch/catalog.py``) answers which sessions exist, which workspace and
record folder each has and whether it is included; this module keeps the catalog's header
cache in the index (``session_files``), so a query re-reads the header of changed files only.
Workspaces already in the index are kept too, so a session file that was deleted does not
make its workspace's records disappear from search; those are left out by the same
``include``/``exclude`` rule (``Scope.exclusion``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pbot_watch.catalog import Catalog, HeaderCache, Scope
from pbot_watch.search.index import RecordFolder, SearchIndex


def catalog(index: SearchIndex, roots: Iterable[Path], scope: Scope) -> Catalog:
    """The catalog of ``roots`` with the header cache kept in ``index`` (see ``save_headers``)."""
    rows = index.conn.execute("SELECT path, ino, size, mtime_ns, session_id, workspace FROM session_files")
    return Catalog(list(roots), scope, HeaderCache.from_rows(rows))


def save_headers(index: SearchIndex, headers: HeaderCache) -> None:
    """Keep the headers read since the cache was loaded, for the next query."""
    changed = headers.take_rows()
    if changed:
        with index.transaction():
            index.conn.executemany(
                "INSERT INTO session_files(path, ino, size, mtime_ns, session_id, workspace) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(path) DO UPDATE SET ino=excluded.ino, size=excluded.size, mtime_ns=excluded.mtime_ns, "
                "session_id=excluded.session_id, workspace=excluded.workspace",
                changed,
            )


def record_folders(
    index: SearchIndex, roots: Iterable[Path], scope: Scope, skipped: list[str] | None = None
) -> list[RecordFolder]:
    """The record folders to refresh before a query (``skipped``: as ``Catalog.sightings``).

    A workspace that ``index``, ``run`` and ``summarize`` leave out by ``include``/``exclude``
    is not searched either (``Catalog.record_folders``, ``Scope.exclusion``): pass
    ``Scope.of(settings)``; a plain ``Scope()`` (no globs) is every workspace. A central
    archive (``scope.archive``) holds only what was written under the settings, so it is
    searched whole.
    """
    if scope.archive is not None:
        return [RecordFolder(scope.archive, None)]
    found = catalog(index, roots, scope)
    folders = {
        path: RecordFolder(path, workspace) for path, workspace in found.record_folders(skipped).items()
    }
    save_headers(index, found.cache)
    for known in index.known_folders():
        if known.workspace is not None and not scope.excludes(known.workspace):
            folders.setdefault(known.path, known)
    return sorted(folders.values(), key=lambda f: str(f.path))
