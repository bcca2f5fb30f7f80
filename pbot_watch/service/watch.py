"""File-system watching: watchdog observers on every session root, with a visible polling fallback.

Roles are kept apart as in watchdog itself: the observer's thread only turns events into
"look at this path again" items on a queue (``Change``); the service's consumer debounces
them and does the reading. Nothing slow ever runs on the observer's thread.

Roots that do not exist yet are re-checked on every tick and watched as soon as they appear
(then scanned, since files may have been created before the watch). inotify can fail to start
or run out of watches (``ENOSPC``) or instances (``EMFILE``); then the service switches to
watchdog's ``PollingObserver`` for all roots and says why in status.

A session folder that is a symlink is read through the link (as Pi lists it), but a recursive
watch does not follow it: each one is watched where it points, its events put back under the
link (``LinkedHandler``), so its appends arrive as fast as in a plain folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog
from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver

from pbot_watch.pi.untrusted import unstorable_name
from pbot_watch.service.status import ObserverInfo, RootInfo
from pbot_watch.sources import walk_folders

log = structlog.get_logger("pbot_watch.service")

SUFFIX = ".jsonl"
# Opened/closed-without-write events are our own reads; attribute changes carry no content.
_CONTENT_EVENTS = {
    EVENT_TYPE_CREATED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MOVED,
    EVENT_TYPE_CLOSED,
}
_LIMIT_ERRNOS = {errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.ENOMEM}

ChangeKind = Literal["file", "folder", "folder-gone", "wake"]


@dataclass(frozen=True, slots=True)
class Change:
    """One item on the queue: look at ``path`` again."""

    kind: ChangeKind
    path: Path


def _fspath(value: bytes | str) -> str:
    return os.fsdecode(value)


class EnqueueHandler(FileSystemEventHandler):
    """Runs on the observer thread: filter and enqueue, nothing else."""

    def __init__(self, changes: queue.SimpleQueue[Change]) -> None:
        self.changes = changes

    def translate(self, raw: str) -> str:
        """The path the service knows for a path an event names (itself, under a root)."""
        return raw

    def dispatch(self, event: FileSystemEvent) -> None:
        if event.event_type not in _CONTENT_EVENTS:
            return
        paths = [self.translate(_fspath(event.src_path))]
        if event.event_type == EVENT_TYPE_MOVED and event.dest_path:
            paths.append(self.translate(_fspath(event.dest_path)))
        for raw in paths:
            if not raw:
                continue
            arrived = event.event_type == EVENT_TYPE_CREATED or (
                event.event_type == EVENT_TYPE_MOVED and raw != paths[0]
            )
            if event.is_directory:
                if arrived:
                    self.changes.put(Change("folder", Path(raw)))
                elif event.event_type in (EVENT_TYPE_DELETED, EVENT_TYPE_MOVED):
                    self.changes.put(Change("folder-gone", Path(raw)))
            elif raw.endswith(SUFFIX) and not unstorable_name(raw):
                # A name that is not UTF-8 is no session the service can keep (sources.py).
                self.changes.put(Change("file", Path(raw)))
            elif arrived and os.path.islink(raw) and os.path.isdir(raw):
                # A symlink to a folder (inotify reports the link, not a folder): its files are
                # read through it, and the consumer watches where it points.
                self.changes.put(Change("folder", Path(raw)))


class LinkedHandler(EnqueueHandler):
    """For a folder reached through a symlink: events name the target, the service knows the link.

    inotify watches inodes, and watchdog's recursive watch does not follow symlinked folders,
    so a session folder that is a symlink (``sessions/--home-me-proj--`` -> elsewhere) is
    watched where it points, and each event's path is put back under the link.
    """

    def __init__(self, changes: queue.SimpleQueue[Change], link: Path, target: Path) -> None:
        super().__init__(changes)
        self.link = str(link)
        self.target = str(target)

    def translate(self, raw: str) -> str:
        if raw == self.target:
            return self.link
        if raw.startswith(self.target + os.sep):
            return self.link + raw[len(self.target) :]
        return raw


def linked_folders(root: Path) -> dict[Path, Path]:
    """Folders below ``root`` that are symlinks to folders (at any depth, as the scans follow
    them), each with the real folder it points to; a folder reached twice is listed once.
    """
    found: dict[Path, Path] = {}
    for children in walk_folders(root):
        for entry in children:
            try:
                if entry.is_symlink() and entry.is_dir():
                    found[Path(entry.path)] = Path(entry.path).resolve()
            except (OSError, RuntimeError):  # a loop of links: resolve gives up
                continue
    return found


def observer_kind(observer: BaseObserver) -> str:
    name = type(observer).__name__.lower()
    for kind in ("inotify", "fsevents", "kqueue", "polling"):
        if kind in name:
            return kind
    return name.removesuffix("observer") or "unknown"


class Watcher:
    """The observer and the state of each root; driven from the consumer thread's ticks."""

    def __init__(
        self, roots: list[Path], changes: queue.SimpleQueue[Change], poll: bool, poll_seconds: float
    ) -> None:
        self.roots = roots
        self.changes = changes
        self.poll_seconds = poll_seconds
        self.handler = EnqueueHandler(changes)
        self.watches: dict[Path, ObservedWatch] = {}
        # Symlinked folders below the roots, watched where they point: link -> (target, watch).
        self.links: dict[Path, tuple[Path, ObservedWatch]] = {}
        self.info = ObserverInfo(kind="none", reason=None)
        self._observer: BaseObserver | None = None
        self._polling = poll
        self._poll_reason = "polling requested (--poll / poll = true)" if poll else None

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> list[Path]:
        """Start observing; return the roots that exist (the caller scans them)."""
        if not self._polling:
            try:
                self._start(Observer())
            except OSError as error:
                self._fall_back(f"inotify could not start: {_describe(error)}")
        else:
            self._start(PollingObserver(timeout=self.poll_seconds))
        return list(self.watches)

    def _start(self, observer: BaseObserver) -> None:
        self._observer = observer
        self.watches = {}
        self.links = {}
        for root in self.roots:
            if root.is_dir():
                self.watches[root] = observer.schedule(self.handler, str(root), recursive=True)
        try:
            observer.start()
        except BaseException:
            self._observer = None
            self.watches = {}
            with contextlib.suppress(Exception):
                observer.stop()
            raise
        self.info = ObserverInfo(kind=observer_kind(observer), reason=self._poll_reason)
        log.info(
            "observer_started",
            observer=self.info.kind,
            reason=self.info.reason,
            roots=[str(r) for r in self.watches],
        )
        self.refresh_links()

    def refresh_links(self) -> None:
        """Watch every symlinked folder below the watched roots where it points; drop stale ones.

        Called at start, when a root appears, when a symlink to a folder is created and at each
        reconcile; a folder inside a watched root needs no watch of its own.
        """
        observer = self._observer
        if observer is None:
            return
        wanted = {
            link: target
            for root in self.watches
            for link, target in linked_folders(root).items()
            if not any(target.is_relative_to(r) for r in self.watches)  # else watched already
        }
        for link, (target, watch) in list(self.links.items()):
            if wanted.get(link) != target:
                with contextlib.suppress(Exception):
                    observer.unschedule(watch)
                del self.links[link]
        for link, target in wanted.items():
            if link in self.links:
                continue
            try:
                watch = observer.schedule(
                    LinkedHandler(self.changes, link, target), str(target), recursive=True
                )
            except OSError as error:
                log.warning(
                    "linked_folder_watch_failed", link=str(link), target=str(target), error=str(error)
                )
                continue
            self.links[link] = (target, watch)
            log.info("linked_folder_watched", link=str(link), target=str(target))

    def _fall_back(self, reason: str) -> None:
        log.warning("fell_back_to_polling", reason=reason)
        self.stop()
        self.watches = {}
        self._polling = True
        self._poll_reason = reason
        self._start(PollingObserver(timeout=self.poll_seconds))

    def stop(self, timeout: float = 1.0) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        observer.stop()
        with contextlib.suppress(RuntimeError):
            observer.join(timeout)

    # ---- per tick ------------------------------------------------------------------------
    def check(self) -> tuple[list[Path], list[Path]]:
        """Watch roots that appeared, drop roots that vanished, re-watch roots whose watch died.

        A watch dies when its root is deleted (inotify drops it; the root may be back already)
        or when inotify fails while adding a subfolder. Scheduling it again tells the two apart:
        it works, or it fails with a limit and the service falls back to polling. Returns the
        roots newly watched (they need a scan: files may have appeared unseen) and the roots
        that vanished (their files are gone, whether or not each deletion sent an event).
        """
        observer = self._observer
        if observer is None:
            return [], []
        emitters = {e.watch: e for e in list(observer.emitters)}
        appeared: list[Path] = []
        vanished: list[Path] = []
        for root in self.roots:
            exists = root.is_dir()
            watch = self.watches.get(root)
            if watch is not None:
                emitter = emitters.get(watch)
                if exists and emitter is not None and emitter.is_alive():
                    continue
                with contextlib.suppress(Exception):
                    observer.unschedule(watch)
                del self.watches[root]
                if not exists:
                    log.info("root_vanished", root=str(root))
                    vanished.append(root)
                    continue
                log.info("root_rewatched", root=str(root), reason="its watch stopped")
            if not exists:
                continue
            try:
                self.watches[root] = observer.schedule(self.handler, str(root), recursive=True)
            except OSError as error:
                if self._polling or error.errno not in _LIMIT_ERRNOS:
                    log.warning("root_watch_failed", root=str(root), error=str(error))
                    continue
                self._fall_back(f"inotify limit reached watching {root}: {_describe(error)}")
                return list(self.watches), vanished
            log.info("root_watched", root=str(root))
            appeared.append(root)
        if appeared:
            self.refresh_links()
        return appeared, vanished

    def root_info(self) -> list[RootInfo]:
        return [RootInfo(path=str(r), exists=r.is_dir(), watched=r in self.watches) for r in self.roots]


def _describe(error: OSError) -> str:
    name = errno.errorcode.get(error.errno or 0, "")
    return f"{name} {error.strerror or error}".strip()
