"""The cue state of the session files a long-lived process is asked about, kept by reading only what was appended.

A marathon session is hundreds of MB, and its cues are asked for at every compaction, each
time the person moves in the tree, and again when Pi is started on it. Parsing the whole file
for each answer (and holding all its entries at once) cost a 300 MB session 15 s and a GB of
memory. So each file asked about has a ``CueLedger`` (``cues.py``: the compact, incremental
state the cues are computed from) and a reader parked where it stopped: a request, or an idle
moment of the process (``follow``), reads the bytes appended since, through the one tail reader
(``SessionTail``), a piece at a time. A rewritten file (not an append of the bytes read: the
cursor's plan) is read again from its start.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pbot_watch import __version__
from pbot_watch.archive.atomic import ensure_dir, write_atomic
from pbot_watch.log import get_logger
from pbot_watch.memory.cues import Call, CueLedger, Work, utc_moment
from pbot_watch.pi.cursor import Cursor
from pbot_watch.pi.entries import SessionHeader, SessionReader
from pbot_watch.redact import policy
from pbot_watch.search.errors import QueryError
from pbot_watch.sources import READ_PIECE, NotRegularFile, SessionTail

log = get_logger(__name__)

FOLLOWED_FILES = 4
"""Session files whose ledgers are kept (a Pi process works in one at a time); the least recently asked go first."""
FOLLOW_PIECE = READ_PIECE
"""Bytes an idle step reads: a request that comes meanwhile waits for at most one piece."""
SAVE_EVERY = 64 << 20
"""A ledger is saved after this many bytes read at once (a first read of a marathon session),
so a process stopped in the middle resumes from there; smaller growth is saved when idle."""
SAVED_FROM = 16 << 20
"""Only the ledgers of files this big are saved: a smaller file is read whole in well under a second."""
LEDGER_FORMAT: Literal[1] = 1


class StoredLedger(BaseModel):
    """A ``CueLedger`` and where its file was read to, on disk: a new process goes on from there.

    Pi starts a new child each time it starts, and a marathon session's first cues must not
    cost a parse of the whole file each time. What a ledger keeps is the cue lines as this
    version of pbot-watch writes them, redacted or not: a ledger of another version, or made
    with the other redaction setting, is not used (the file is read again).
    """

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = LEDGER_FORMAT
    version: str
    redacted: bool
    path: str
    header: str
    """The session header (JSON): a reader resumes with it."""
    cursor: tuple[int, int, int, str, str, int, str]
    entries: int
    next_order: int
    last_id: str | None
    links: list[tuple[str, str | None]]
    """Each entry id and its parent."""
    kept: dict[str, str]
    work: list[tuple[int, str, int, str, str, str, str, bool, str, str | None]]
    """order, entry id, part, handle, timestamp, full, brief, failed, tool, path."""
    recalls: list[tuple[str, str, int]]
    cue_calls: dict[str, tuple[str, str, str | None, str | None]]
    """name, shown argument, its key, file."""
    own_calls: dict[str, bool]
    answered: list[str]
    unanswered: dict[str, list[int]]

    @classmethod
    def of(cls, path: Path, header: SessionHeader, cursor: Cursor, ledger: CueLedger) -> StoredLedger:
        return cls(
            version=__version__,
            redacted=policy.enabled(),
            path=str(path),
            header=header.model_dump_json(),
            cursor=cursor.row(),
            entries=ledger.entries,
            next_order=ledger.next_order,
            last_id=ledger.last_id,
            links=list(ledger.links.values()),
            kept=ledger.kept,
            work=[
                (
                    w.order,
                    w.key[0],
                    w.key[1],
                    w.handle,
                    w.timestamp,
                    w.full,
                    w.brief,
                    w.failed,
                    w.tool,
                    w.path,
                )
                for w in ledger.work.values()
            ],
            recalls=[(entry_id, key[0], key[1]) for entry_id, key in ledger.recalls],
            cue_calls={
                i: (c.name, c.argument[0], c.argument[1], c.file) for i, c in ledger.cue_calls.items()
            },
            own_calls=ledger.own_calls,
            answered=sorted(ledger.answered),
            unanswered=ledger.unanswered,
        )

    def current(self, path: Path) -> bool:
        """Made for ``path`` by this version with this redaction setting."""
        return self.version == __version__ and self.redacted == policy.enabled() and self.path == str(path)

    def restore(self) -> tuple[SessionHeader, Cursor, CueLedger]:
        header = SessionHeader.model_validate_json(self.header)
        ledger = CueLedger(header.id, header.workspace)
        ledger.entries, ledger.next_order, ledger.last_id = self.entries, self.next_order, self.last_id
        ledger.links = {entry_id: (entry_id, parent) for entry_id, parent in self.links}
        ledger.kept = self.kept
        ledger.work = {
            order: Work(
                (entry_id, part), handle, order, stamp, utc_moment(stamp), full, brief, failed, tool, file
            )
            for order, entry_id, part, handle, stamp, full, brief, failed, tool, file in self.work
        }
        ledger.recalls = [(entry_id, (key, part)) for entry_id, key, part in self.recalls]
        ledger.cue_calls = {
            i: Call(name, (value, key), file) for i, (name, value, key, file) in self.cue_calls.items()
        }
        ledger.own_calls = self.own_calls
        ledger.answered = set(self.answered)
        ledger.unanswered = self.unanswered
        return header, Cursor.from_row(self.cursor), ledger


LEDGER_HEAD = 64 << 10
"""Bytes of a saved ledger read for its file's path (``StoredLedger`` writes it fourth, after three short fields)."""
_PATH_FIELD = re.compile(rb'"path":("(?:[^"\\]|\\.)*")')


def clean_ledgers(store: Path) -> int:
    """Delete the saved ledgers whose session file is gone; how many.

    A ledger is named by a hash of its file's path, so nothing but the file's disappearance
    ever replaces or removes it: without this, every marathon session Pi ever ran would leave
    megabytes behind in the state folder. The Pi child calls it once, in its first idle moment.
    Only the head of each ledger is read; one whose path cannot be read there is left alone
    (a damaged one is replaced when its file is read again).
    """
    removed = 0
    try:
        saved = sorted(store.glob("*.json"))
    except OSError:
        return 0
    for stored in saved:
        try:
            with stored.open("rb") as handle:
                found = _PATH_FIELD.search(handle.read(LEDGER_HEAD))
            if found is None:
                continue
            path = json.loads(found.group(1))
            if not isinstance(path, str) or os.path.lexists(path):
                continue
            stored.unlink()
            removed += 1
        except (OSError, ValueError) as error:
            log.warning("cue_ledger_not_cleaned", path=str(stored), error=str(error)[:200])
    if removed:
        log.info("cue_ledgers_cleaned", removed=removed)
    return removed


class NotASession(QueryError):
    """A cue request for a file that is no Pi session."""


@dataclass
class _Followed:
    """One file's ledger and where its reading stands."""

    reader: SessionReader
    ledger: CueLedger | None = None
    cursor: Cursor | None = None
    """The file's identity and fingerprints at the last complete line read (``None``: nothing read)."""
    fed: int = 0
    """Bytes fed to ``reader`` (past ``cursor``: an unfinished last line waits in it)."""
    behind: bool = True
    """Bytes were left unread at the last read (a budget stopped it), or nothing was read yet."""
    unsaved: int = 0
    """Bytes read since the ledger was last saved."""


class FollowedCues:
    """Ledgers of the last few session files asked about, brought up to date as they grow.

    With ``store`` (a folder of the state directory), each ledger is saved there as the file is
    read, and a new process starts from the saved one: only what was appended since is read.
    """

    def __init__(
        self, store: Path | None = None, keep: int = FOLLOWED_FILES, saved_from: int = SAVED_FROM
    ) -> None:
        self.store = store
        self.keep = keep
        self.saved_from = saved_from
        self._files: OrderedDict[Path, _Followed] = OrderedDict()
        self.bytes_read = 0
        """Session bytes read so far (what a benchmark or a test compares with the appends)."""

    def watch(self, path: Path) -> None:
        """Follow ``path`` from now on (read in idle moments), without reading it now."""
        if path not in self._files:
            self._files[path] = self._load(path) or _Followed(SessionReader())
            self._trim()

    def ledger(self, path: Path) -> CueLedger:
        """The ledger of ``path`` with every complete line of the file read.

        Raises ``NotASession`` for a file that is none (a FIFO or a device is never opened),
        and ``OSError`` when it cannot be read.
        """
        self.watch(path)
        self._files.move_to_end(path)
        try:
            while (followed := self._read(path, SAVE_EVERY)).behind:
                self._save(path, followed)  # a process stopped in the middle resumes from here
        except NotRegularFile as refused:  # a FIFO or a device: never opened, never read
            self._files.pop(path, None)
            raise NotASession(f"{path}: not a Pi session: {refused.strerror}") from refused
        except OSError:
            self._files.pop(path, None)
            raise
        if followed.ledger is None:
            self._files.pop(path, None)
            raise NotASession(f"{path}: not a Pi session")
        if followed.unsaved >= SAVE_EVERY:
            self._save(path, followed)
        return followed.ledger

    def follow(self, budget: int = FOLLOW_PIECE) -> bool:
        """Read at most ``budget`` new bytes of the followed files; whether any was left to read.

        For an idle moment: the newest file asked about first; a ledger caught up with its file
        is saved. A file that is gone or cannot be read is dropped (the next request says why).
        """
        for path in reversed(list(self._files)):
            try:
                followed = self._read(path, budget)
            except OSError:
                self._files.pop(path, None)
                continue
            if followed.ledger is None and followed.reader.not_session:
                self._files.pop(path, None)
            elif followed.behind:
                return True
            elif followed.unsaved and self.store is not None:
                self._save(path, followed)
                return True
        return False

    def _read(self, path: Path, budget: int | None) -> _Followed:
        followed = self._files[path]
        with SessionTail(path) as tail:
            if followed.cursor is not None:
                decision, _ = tail.plan(followed.cursor, whole=False)
                if decision == "nothing":
                    return followed
                if decision != "append" or tail.size < followed.fed:  # rewritten, truncated, replaced
                    followed = self._files[path] = _Followed(SessionReader())
            if followed.reader.not_session:
                return followed
            reader = followed.reader

            def parse(chunk: bytes) -> bool:
                entries = reader.feed(chunk)
                if reader.not_session:
                    return False
                if reader.header is not None:
                    if followed.ledger is None:
                        followed.ledger = CueLedger(reader.header.id, reader.header.workspace)
                    followed.ledger.feed(entries)
                return True

            read = tail.feed(followed.fed, parse, budget=budget)
            self.bytes_read += read
            followed.fed += read
            followed.unsaved += read
            followed.behind = followed.fed < tail.size and not reader.not_session
            followed.cursor = tail.cursor(reader.consumed)
        return followed

    def _file(self, path: Path) -> Path | None:
        if self.store is None:
            return None
        name = hashlib.blake2b(str(path).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
        return self.store / f"{name}.json"

    def _load(self, path: Path) -> _Followed | None:
        """The saved ledger of ``path``, if one was saved by this version (else it is read anew)."""
        stored = self._file(path)
        if stored is None:
            return None
        try:
            saved = StoredLedger.model_validate_json(stored.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError) as error:  # damaged or of another format
            log.warning("cue_ledger_unreadable", path=str(stored), error=str(error)[:200])
            return None
        if not saved.current(path):
            return None
        header, cursor, ledger = saved.restore()
        reader = SessionReader.resume(header, cursor.offset, ledger.entries)
        return _Followed(reader, ledger, cursor, fed=cursor.offset, behind=False)

    def _save(self, path: Path, followed: _Followed) -> None:
        """Save the ledger as of the last complete line read; a failure only costs a later read."""
        followed.unsaved = 0
        stored = self._file(path)
        header = followed.reader.header
        if stored is None or followed.ledger is None or header is None or followed.cursor is None:
            return
        if followed.cursor.offset < self.saved_from:
            return
        try:
            ensure_dir(stored.parent)  # 0700, as every folder of the state
            data = StoredLedger.of(path, header, followed.cursor, followed.ledger).model_dump_json()
            write_atomic(stored, data.encode("utf-8", "surrogatepass"), sync_dir=False)
        except OSError as error:
            log.warning("cue_ledger_not_saved", path=str(stored), error=str(error))

    def _trim(self) -> None:
        while len(self._files) > self.keep:
            self._files.popitem(last=False)
