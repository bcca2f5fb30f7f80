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
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import zstandard
from pydantic import BaseModel, ConfigDict, ValidationError

from pbot_watch import __version__
from pbot_watch.archive.atomic import ensure_dir, write_atomic
from pbot_watch.errors import PbotWatchError
from pbot_watch.log import get_logger
from pbot_watch.memory.cues import Call, CueLedger, Work
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
LEDGER_FORMAT: Literal[2] = 2
"""2: a JSON head line, then the body as msgpack in one zstd frame. 1 (JSON through pydantic,
1.4 s to load at 300 MB) is ignored and its files removed (``clean_ledgers``)."""
LEDGER_STORE = "cue-ledgers"
"""The state directory's folder of saved cue ledgers: the service saves there, the Pi child and
``pbot-watch cues`` look there."""
LEDGER_SUFFIX = ".cues"
OLD_SUFFIXES = (".json",)
"""Ledgers of earlier formats: never read, removed when the store is cleaned."""
LEDGER_HEAD = 64 << 10
"""At most this many bytes of a saved ledger are read for its head (the file's path, where it
was read to): what cleaning the store and the service's start look at, without the body."""
_PACK = zstandard.ZstdCompressor(level=3, write_checksum=True)
"""Level 3: a 300 MB session's ledger (12 MB of msgpack) in tens of milliseconds, a quarter of its
size; the checksum makes a damaged body a refused one, not a wrong ledger."""


def ledger_store(state_dir: Path) -> Path:
    """Where the saved cue ledgers of this state directory are."""
    return state_dir / LEDGER_STORE


class LedgerHead(BaseModel):
    """What a saved ledger is of, and where its file was read to: the first line of the file, JSON.

    A ledger keeps the cue lines as this version of pbot-watch writes them, redacted or not: a
    ledger of another version or format, or made with the other redaction setting, or for
    another file, is not used (the file is read again). ``body`` is the length of what follows,
    so a file cut short is refused before it is decoded.
    """

    model_config = ConfigDict(extra="forbid")

    format: Literal[2]
    version: str
    redacted: bool
    path: str
    header: str
    """The session header (JSON): a reader resumes with it."""
    cursor: tuple[int, int, int, str, str, int, str]
    entries: int
    v1_headers: list[int]
    """A v1 file's extra header lines before ``cursor`` (``SessionReader.resume`` takes them)."""
    body: int

    def current(self, path: Path) -> bool:
        """Made for ``path`` by this version of this format with this redaction setting."""
        return self.version == __version__ and self.redacted == policy.enabled() and self.path == _named(path)


class LedgerBody(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A ``CueLedger``'s state, as msgpack: decoded by msgspec straight into its parts.

    A marathon session's ledger holds tens of thousands of lines and links; validating them
    one by one as pydantic models is what made a new Pi child wait 1.4 s before its first cues.
    msgspec checks every field's type as strictly while it decodes, in C.
    """

    next_order: int
    last_id: str | None
    links: list[tuple[str, str | None]]
    """Each entry id and its parent."""
    kept: dict[str, str]
    work: list[Work]
    recalls: list[tuple[str, tuple[str, int]]]
    cue_calls: dict[str, Call]
    own_calls: dict[str, bool]
    answered: set[str]
    unanswered: dict[str, list[int]]

    @classmethod
    def of(cls, ledger: CueLedger) -> LedgerBody:
        return cls(
            next_order=ledger.next_order,
            last_id=ledger.last_id,
            links=list(ledger.links.values()),
            kept=ledger.kept,
            work=list(ledger.work.values()),
            recalls=ledger.recalls,
            cue_calls=ledger.cue_calls,
            own_calls=ledger.own_calls,
            answered=ledger.answered,
            unanswered=ledger.unanswered,
        )

    def restore(self, header: SessionHeader, entries: int) -> CueLedger:
        ledger = CueLedger(header.id, header.workspace)
        ledger.entries, ledger.next_order, ledger.last_id = entries, self.next_order, self.last_id
        ledger.links = {link[0]: link for link in self.links}
        ledger.kept = self.kept
        ledger.work = {work.order: work for work in self.work}
        ledger.recalls = self.recalls
        ledger.cue_calls = self.cue_calls
        ledger.own_calls = self.own_calls
        ledger.answered = self.answered
        ledger.unanswered = self.unanswered
        return ledger


_BODY = msgspec.msgpack.Decoder(LedgerBody)


class LedgerRefused(PbotWatchError, ValueError):
    """A saved ledger that is damaged, cut short, or of another format."""


def encode_ledger(path: Path, reader: SessionReader, cursor: Cursor, ledger: CueLedger) -> bytes:
    r"""The saved form of ``ledger`` of ``path``, read by ``reader`` up to ``cursor``.

    Raises ``UnicodeEncodeError`` for a ledger holding a lone surrogate (a tool output with a
    ``\ud800`` escape): msgpack holds UTF-8 only; such a file is read by each process instead.
    """
    assert reader.header is not None
    body = _PACK.compress(msgspec.msgpack.encode(LedgerBody.of(ledger)))
    head = LedgerHead(
        format=LEDGER_FORMAT,
        version=__version__,
        redacted=policy.enabled(),
        path=_named(path),
        header=reader.header.model_dump_json(),
        cursor=cursor.row(),
        entries=ledger.entries,
        v1_headers=list(reader.v1_headers),
        body=len(body),
    )
    return head.model_dump_json().encode() + b"\n" + body


def ledger_head(data: bytes) -> LedgerHead:
    """The head of a saved ledger (its first line); raises ``LedgerRefused``."""
    line, newline, _ = data.partition(b"\n")
    if not newline:
        raise LedgerRefused("no head line")
    try:
        return LedgerHead.model_validate_json(line)
    except ValidationError as error:
        raise LedgerRefused(str(error)) from None


def decode_ledger(data: bytes, head: LedgerHead) -> tuple[SessionHeader, Cursor, SessionReader, CueLedger]:
    """The ledger whose saved form is ``data`` (with its ``head``), and the reader that goes on after it."""
    body = data[data.index(b"\n") + 1 :]
    if len(body) != head.body:
        raise LedgerRefused(f"body of {len(body)} bytes, {head.body} written")
    try:
        state = _BODY.decode(zstandard.ZstdDecompressor().decompress(body))
        header = SessionHeader.model_validate_json(head.header)
    except (zstandard.ZstdError, msgspec.DecodeError, ValidationError) as error:
        raise LedgerRefused(str(error)) from None
    cursor = Cursor.from_row(head.cursor)
    reader = SessionReader.resume(header, cursor.offset, head.entries, head.v1_headers)
    return header, cursor, reader, state.restore(header, head.entries)


def _named(path: Path) -> str:
    """The name a ledger knows its file by: the real path, so the service (which found the file
    under its roots) and Pi (which names it from its own session folder) name it alike.
    """
    return os.path.realpath(path)


def clean_ledgers(store: Path) -> int:
    """Delete the saved ledgers whose session file is gone, and those of earlier formats; how many.

    A ledger is named by a hash of its file's path, so nothing but the file's disappearance
    ever replaces or removes it: without this, every marathon session Pi ever ran would leave
    megabytes behind in the state folder. The Pi child calls it once, in its first idle moment.
    Only the head of each ledger is read; one whose head cannot be read is left alone (a
    damaged one is replaced when its file is read again).
    """
    removed = 0
    try:
        saved = sorted(store.iterdir())
    except OSError:
        return 0
    for stored in saved:
        try:
            if stored.suffix in OLD_SUFFIXES:
                stored.unlink()
                removed += 1
                continue
            if stored.suffix != LEDGER_SUFFIX:
                continue
            with stored.open("rb") as handle:
                head = ledger_head(handle.read(LEDGER_HEAD))
            if os.path.lexists(head.path):
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
    """Bytes read since the ledger was last saved (or loaded)."""
    saved_at: int | None = None
    """The saved ledger's ``st_mtime_ns`` when it was last loaded or written here: another
    process (the service) saving a newer one changes it."""


class FollowedCues:
    """Ledgers of the last few session files asked about, brought up to date as they grow.

    With ``store`` (``ledger_store`` of the state directory), each ledger is saved there as the
    file is read, and a new process starts from the saved one: only what was appended since is
    read. The service keeps the same ledgers from the entries it reads anyway (``take``), so a
    Pi child asked about a session the service has read finds its ledger saved, current up to
    the last append or so. ``save_every`` is how many bytes read since the last save make the
    next one (a first read of a marathon session is saved as it goes, so a process stopped in
    the middle resumes from there); the rest is saved when idle (``follow``) or when the ledger
    leaves this process's few (``keep``).
    """

    def __init__(
        self,
        store: Path | None = None,
        keep: int = FOLLOWED_FILES,
        saved_from: int = SAVED_FROM,
        save_every: int = SAVE_EVERY,
    ) -> None:
        self.store = store
        self.keep = keep
        self.saved_from = saved_from
        self.save_every = save_every
        self._files: OrderedDict[Path, _Followed] = OrderedDict()
        self.bytes_read = 0
        """Session bytes read so far (what a benchmark or a test compares with the appends)."""
        self.taken = 0
        """Reads of another reader whose entries were fed as they were (``take``)."""

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
        self._fresher(path)
        try:
            while (followed := self._read(path, self.save_every)).behind:
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
        if followed.unsaved >= self.save_every:
            self._save(path, followed)
        return followed.ledger

    def follow(self, budget: int = FOLLOW_PIECE) -> bool:
        """Read at most ``budget`` new bytes of the followed files; whether any was left to read.

        For an idle moment: the newest file asked about first; a ledger caught up with its file
        is saved. A file that is gone or cannot be read is dropped (the next request says why).
        """
        for path in reversed(list(self._files)):
            try:
                self._fresher(path)
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

    def take(
        self,
        path: Path,
        header: SessionHeader,
        start: int,
        entries: Sequence[dict[str, Any]],
        cursor: Cursor,
    ) -> bool:
        """Feed ``path``'s ledger the entries another reader parsed (the service's); whether it could.

        ``start`` is where they begin in the file (0: the file from its start), ``cursor`` where
        that reader stopped. They are fed when they go on where the ledger stands (held here,
        or saved and still the file's beginning), or start the file again (a ledger that still
        matches the file skips the entries it holds). Otherwise (nothing known of the file's
        beginning) nothing is fed: the caller reads the file (``ledger``), once.
        """
        followed = self._files.get(path)
        if followed is None and (followed := self._load(path)) is not None:
            self._files[path] = followed
        if followed is not None:
            self._files.move_to_end(path)
        ledger = followed.ledger if followed is not None else None
        held = followed.cursor if followed is not None else None
        if start == 0:
            skip = 0
            if ledger is not None and held is not None and _still_prefix(path, held, cursor):
                skip = ledger.entries  # bytes the ledger read are the file's beginning still
            else:
                ledger = CueLedger(header.id, header.workspace)
                followed = self._files[path] = _Followed(SessionReader(), ledger)
                held = None
            if skip > len(entries):
                return False
            ledger.feed(entries[skip:])
        elif ledger is not None and held is not None and held.offset == start and _same_file(held, cursor):
            ledger.feed(entries)
        else:
            return False
        assert followed is not None
        followed.unsaved += cursor.offset - (held.offset if held is not None else 0)
        followed.cursor, followed.fed, followed.behind = cursor, cursor.offset, False
        followed.reader = SessionReader.resume(header, cursor.offset, ledger.entries)
        self.taken += 1
        self._trim()
        return True

    def save_due(self, path: Path, *, at_end: bool, after: int = 0) -> None:
        """Save ``path``'s ledger if ``save_every`` bytes wait or, its reading at the file's end, ``after`` do.

        A ledger never saved is saved at the file's end whatever waits. Not after every append:
        a saved ledger at most ``after`` behind costs a process that loads it that many bytes
        to read, and saving a marathon session's costs tens of ms; nor after every piece of a
        first read (``save_every`` apart: a process stopped in the middle resumes from there).
        """
        followed = self._files.get(path)
        if followed is None or not followed.unsaved:
            return
        if followed.unsaved >= self.save_every or (
            at_end and (followed.unsaved >= after or followed.saved_at is None)
        ):
            self._save(path, followed)

    def save_all(self) -> None:
        """Save every ledger with bytes not saved yet (a process about to stop)."""
        for path, followed in list(self._files.items()):
            if followed.unsaved:
                self._save(path, followed)

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

    def saved_file(self, path: Path) -> Path | None:
        """Where the ledger of ``path`` is saved (``None``: this process saves none)."""
        if self.store is None:
            return None
        name = hashlib.blake2b(_named(path).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
        return self.store / f"{name}{LEDGER_SUFFIX}"

    def _load(self, path: Path) -> _Followed | None:
        """The saved ledger of ``path``, if one of this version is there and the file still begins with what it read."""
        stored = self.saved_file(path)
        if stored is None:
            return None
        try:
            with stored.open("rb") as handle:
                stamp = os.fstat(handle.fileno()).st_mtime_ns
                data = handle.read()
            head = ledger_head(data)
            if not head.current(path):
                return None
            _header, cursor, reader, ledger = decode_ledger(data, head)
        except FileNotFoundError:
            return None
        except (OSError, LedgerRefused) as error:  # damaged, cut short, or of another format
            log.warning("cue_ledger_unreadable", path=str(stored), error=str(error)[:200])
            return None
        try:
            with SessionTail(path) as tail:
                if tail.plan(cursor, whole=False)[0] == "reread":
                    return None  # the file was rewritten since: read it again
        except OSError:
            return None
        return _Followed(reader, ledger, cursor, fed=cursor.offset, behind=False, saved_at=stamp)

    def _fresher(self, path: Path) -> None:
        """Take the saved ledger of ``path`` instead of reading on, when another process saved one further.

        A child that began reading a marathon session itself (no ledger was saved yet) would
        otherwise go on reading for many seconds what the service has meanwhile saved.
        """
        followed = self._files.get(path)
        stored = self.saved_file(path)
        if followed is None or stored is None or not followed.behind:
            return
        try:
            stamp = stored.stat().st_mtime_ns
        except OSError:
            return
        if stamp == followed.saved_at:
            return
        followed.saved_at = stamp
        loaded = self._load(path)
        if loaded is not None and loaded.fed > followed.fed:
            self._files[path] = loaded

    def _save(self, path: Path, followed: _Followed) -> None:
        """Save the ledger as of the last complete line read; a failure only costs a later read."""
        followed.unsaved = 0
        stored = self.saved_file(path)
        if (
            stored is None
            or followed.ledger is None
            or followed.reader.header is None
            or followed.cursor is None
        ):
            return
        if followed.cursor.offset < self.saved_from:
            return
        try:
            ensure_dir(stored.parent)  # 0700, as every folder of the state
            data = encode_ledger(path, followed.reader, followed.cursor, followed.ledger)
            write_atomic(stored, data, sync_dir=False)
            followed.saved_at = stored.stat().st_mtime_ns
        except UnicodeEncodeError:
            log.info("cue_ledger_not_saved", path=str(stored), error="a lone surrogate in a cue line")
        except OSError as error:
            log.warning("cue_ledger_not_saved", path=str(stored), error=str(error))

    def _trim(self) -> None:
        while len(self._files) > self.keep:
            path, followed = self._files.popitem(last=False)
            if followed.unsaved:
                self._save(path, followed)


def _same_file(held: Cursor, cursor: Cursor) -> bool:
    return (held.dev, held.ino) == (cursor.dev, cursor.ino)


def _still_prefix(path: Path, held: Cursor, cursor: Cursor) -> bool:
    """Whether the bytes a ledger read up to ``held`` still begin the file another reader read to ``cursor``."""
    if not _same_file(held, cursor) or held.offset > cursor.offset:
        return False
    try:
        with SessionTail(path) as tail:
            return tail.plan(held, whole=False)[0] != "reread"
    except OSError:
        return False
