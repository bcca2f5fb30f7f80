"""Pi files in: where sessions are, which files are candidates, their headers, reading them.

Default root: ``${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions``. Pi puts sessions one level
down (``--<cwd>--/``), but a custom ``sessionDir`` is flat and ``/import`` keeps any name,
so every ``*.jsonl`` below a root is a candidate; the header decides whether it is a session.
Every reader opens a session file with ``open_session``: only regular files are session files,
so a FIFO, a device or a folder put where a session was is refused before anything could block
on it or read forever.

``SessionTail`` is the one reader of what is new in a session file, used by the indexer (and so
the service), raw memory, cues and the Pi child: it opens with the guard, plans from a cursor
(``plan_open``), reads the new bytes within a budget into whatever parses them (``feed``), and
makes the new cursor (``cursor_at``), all from one ``fstat`` of one open descriptor.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from pbot_watch.errors import PbotWatchError
from pbot_watch.pi.cursor import Cursor, Plan, fingerprint, hasher, plan, verify
from pbot_watch.pi.entries import SessionHeader, SessionReader, session_header
from pbot_watch.pi.untrusted import shown_path, unstorable_name

HEADER_CHUNK = 1 << 16
DIGEST_CHUNK = 1 << 20
WHOLE_BLOCK = 1 << 20
"""The whole-file fingerprint hashes the file in blocks of this size (see ``WholeDigest``)."""
BLOCKS_SCHEME = "b1:"
"""How a whole fingerprint made of block digests begins; one without it hashed the bytes at once."""
READ_PIECE = 8 << 20
"""New bytes are read and fed this much at a time: what one piece's entries hold stays bounded."""


def agent_dir() -> Path:
    configured = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".pi" / "agent"


def default_session_roots() -> list[Path]:
    return [agent_dir() / "sessions"]


def walk_folders(
    root: Path, enter: Callable[[Path], bool] = lambda _folder: True
) -> Iterator[list[os.DirEntry[str]]]:
    """The entries of ``root`` and of every folder below it, each folder once, sorted by name.

    Directory symlinks are followed, as Pi's listAll does, and a folder reached twice (a link
    back up, two links to one place) is walked once; ``enter`` says whether to go into a
    subfolder. Folders that cannot be read are left out: a scan of a user's folders never
    stops on one. The session scans and the watcher's list of linked folders both walk this.
    """
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            st = folder.stat()
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        yield children
        subfolders: list[Path] = []
        for child in children:
            try:
                if child.is_dir() and enter(Path(child.path)):
                    subfolders.append(Path(child.path))
            except OSError:
                continue
        stack.extend(reversed(subfolders))


def iter_session_files(root: Path, skipped: list[str] | None = None) -> Iterator[Path]:
    """Every ``*.jsonl`` below ``root``, sorted, following directory symlinks once (``walk_folders``).

    A file or folder whose name is not UTF-8 is left out (``unstorable_name``), and the warning
    saying so is added to ``skipped`` when given.
    """
    for path, _entry in iter_session_entries(root, skipped):
        yield Path(path)


def iter_session_entries(
    root: Path, skipped: list[str] | None = None
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``iter_session_files`` as text: each file's path (``str`` of the ``Path`` it yields) and its
    directory entry, whose ``stat()`` is one system call, cached.

    For a caller that compares hundreds of files with what it holds on every call (each memory
    query checks every session file): a ``Path`` per file, built and hashed, cost more than the
    ``stat`` itself.
    """
    for children in walk_folders(root, lambda folder: _named_well(folder, skipped, "a folder")):
        for child in children:
            try:
                if child.name.endswith(".jsonl") and child.is_file():
                    # The folder's text is a Path's (normalised), so the join is one too, except
                    # below "." whose entries read "./name" where the Path reads "name".
                    path = child.path.removeprefix("./")
                    if _named_well(path, skipped, "a session file"):
                        yield path, child
            except OSError:
                continue


def _named_well(path: Path | str, skipped: list[str] | None, kind: str) -> bool:
    if not unstorable_name(path):
        return True
    if skipped is not None:
        skipped.append(
            f"{shown_path(path)}: {kind} whose name is not UTF-8 is skipped (rename it to index it)"
        )
    return False


class NotRegularFile(PbotWatchError, OSError):
    """A session path that holds a folder, FIFO, socket or device: never opened for reading."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: Path, mode: int) -> NotRegularFile:
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    return NotRegularFile(
        code, f"{_kind(mode)}, not a regular file (only regular files are sessions)", str(path)
    )


def open_session(path: Path) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading, never blocking: a descriptor and its ``fstat``; regular files only.

    Opening a FIFO for reading blocks until a writer comes, reading one blocks until it writes,
    and a device such as ``/dev/zero`` never ends; a folder opens fine on Linux and fails only
    at the first read. So the path is ``stat``ed first (a device is never even opened), opened
    ``O_NONBLOCK`` in case it was swapped in between, and checked again on the descriptor.
    Raises ``NotRegularFile`` (an ``OSError``) for anything else, ``FileNotFoundError`` when
    it is gone.
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st.st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_range(fd: int, start: int, length: int) -> bytes:
    """``length`` bytes of an open file from ``start`` (fewer at its end); no read for an empty range."""
    return os.pread(fd, length, start) if length > 0 else b""


def plan_open(fd: int, st: os.stat_result, cursor: Cursor | None) -> tuple[Plan, Cursor | None]:
    """``plan`` for an open file: its identity, size and mtime from ``st``, the windows from ``fd``.

    A file of the cursor's size with a new mtime is fingerprinted whole (``verify``); when it
    turns out unchanged, the cursor comes back refreshed (``Cursor.seen``), for the caller to
    keep, so the same file is not fingerprinted again. Otherwise the second value is ``None``.
    """
    head, tail = Cursor.windows(cursor.offset if cursor is not None else 0)
    check = plan(
        cursor, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, read_range(fd, *head), read_range(fd, *tail)
    )
    if check != "verify":
        return check, None
    assert cursor is not None
    if cursor.whole.startswith(BLOCKS_SCHEME):
        digest = WholeDigest().extend(fd, cursor.offset)
    else:  # a cursor saved before fingerprints were made of blocks: compared the way it was made
        running = hasher()
        for start in range(0, cursor.offset, DIGEST_CHUNK):
            running.update(read_range(fd, start, min(DIGEST_CHUNK, cursor.offset - start)))
        digest = running.hexdigest()
    decision = verify(cursor, digest)
    return decision, cursor.seen(st.st_mtime_ns, digest) if decision == "nothing" else None


class WholeDigest:
    """The fingerprint of a file's bytes [0, ``upto``), extended as its cursor moves on.

    The indexer keeps one per file it reads, so a new cursor's whole fingerprint costs a
    hash of the new bytes only (read back from the page cache), not of the whole file. It is
    the hash of the digests of the file's 1 MB blocks and of its last partial block: a running
    hash cannot be saved, but the block digests (16 bytes a MB) can, beside the file's resume
    log, so a file resumed after a restart hashes at most one block again, not 300 MB.
    """

    __slots__ = ("_hash", "blocks", "upto")

    def __init__(self, blocks: list[bytes] | None = None) -> None:
        """A digest of nothing, or of the first ``len(blocks)`` whole blocks whose digests those are."""
        self.blocks: list[bytes] = list(blocks or [])
        """The digests of the whole blocks hashed so far (read only)."""
        self._hash = hasher()
        self.upto = len(self.blocks) * WHOLE_BLOCK

    def extend(self, fd: int, offset: int) -> str:
        """Hash bytes [``upto``, ``offset``) of ``fd``; the fingerprint of [0, ``offset``)."""
        while self.upto < offset:
            room = WHOLE_BLOCK - self.upto % WHOLE_BLOCK
            chunk = read_range(fd, self.upto, min(offset - self.upto, room))
            if not chunk:
                break
            self._hash.update(chunk)
            self.upto += len(chunk)
            if self.upto % WHOLE_BLOCK == 0:
                self.blocks.append(self._hash.digest())
                self._hash = hasher()
        top = hasher()
        top.update(b"".join(self.blocks))
        top.update(self._hash.digest())
        return BLOCKS_SCHEME + top.hexdigest()


def cursor_at(fd: int, st: os.stat_result, offset: int, whole: WholeDigest | None = None) -> Cursor:
    """The cursor of an open file read up to ``offset``: identity, mtime and fingerprints.

    Without ``whole`` the cursor has no whole-file fingerprint (raw memory's: see its ``_plan``).
    """
    head, tail = Cursor.windows(offset)
    return Cursor(
        st.st_dev,
        st.st_ino,
        offset,
        fingerprint(read_range(fd, *head)),
        fingerprint(read_range(fd, *tail)),
        st.st_mtime_ns,
        whole.extend(fd, offset) if whole is not None else "",
    )


class SessionTail:
    """One session file opened with the guard (``open_session``), read from a cursor.

    Every part that asks "what is new in this session file?" asks it here: ``plan`` compares
    the file with a cursor, ``feed`` reads bytes from an offset (never past the size the file
    had when it was opened, at most ``budget`` of them) into a parser, ``cursor`` says where
    that left the file. What parses the bytes is the caller's (a ``SessionFile`` for records,
    a ``SessionReader`` for raw memory and cues), so bytes are read once per reader.
    """

    __slots__ = ("fd", "path", "st")

    def __init__(self, path: Path) -> None:
        """Open ``path``; raises as ``open_session`` does (``NotRegularFile``, ``FileNotFoundError``)."""
        self.path = path
        self.fd, self.st = open_session(path)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def size(self) -> int:
        """The file's size when it was opened: reading stops there."""
        return self.st.st_size

    def plan(self, cursor: Cursor | None, *, whole: bool = True) -> tuple[Plan, Cursor | None]:
        """``plan_open`` on this file. ``whole=False`` is for a cursor without a whole-file
        fingerprint (raw memory's): a same-size rewrite cannot be ruled out, so it is read again.
        """
        if whole:
            return plan_open(self.fd, self.st, cursor)
        head, tail = Cursor.windows(cursor.offset if cursor is not None else 0)
        check = plan(
            cursor,
            self.st.st_dev,
            self.st.st_ino,
            self.st.st_size,
            self.st.st_mtime_ns,
            read_range(self.fd, *head),
            read_range(self.fd, *tail),
        )
        return ("reread" if check == "verify" else check), None

    def line_pending(self, offset: int, peek: int) -> bool:
        """Whether the bytes after ``offset`` (at most ``peek`` of them) are one unfinished line.

        Such bytes become parseable when their newline arrives, and that write brings another
        event: nothing is to be read for them now. Longer tails are not peeked at: read them.
        """
        rest = self.size - offset
        return 0 < rest <= peek and b"\n" not in read_range(self.fd, offset, rest)

    def feed(
        self,
        start: int,
        parse: Callable[[bytes], Any],
        budget: int | None = None,
        piece: int = READ_PIECE,
        on_piece: Callable[[int], None] | None = None,
    ) -> int:
        """Read bytes from ``start`` (up to ``budget`` of them) in pieces into ``parse``; how many were read.

        ``parse`` returning ``False`` stops the reading (a file found to be no session). A file
        truncated while it is read ends the reading early: its next plan sees it.
        """
        end = self.size if budget is None else min(self.size, start + budget)
        offset = start
        while offset < end:
            chunk = read_range(self.fd, offset, min(end - offset, piece))
            if not chunk:
                break
            offset += len(chunk)
            go_on = parse(chunk)
            if on_piece is not None:
                on_piece(len(chunk))
            if go_on is False:
                break
        return offset - start

    def cursor(self, offset: int, whole: WholeDigest | None = None) -> Cursor:
        """``cursor_at`` for this file read up to ``offset``."""
        return cursor_at(self.fd, self.st, offset, whole)


def read_session_entries(path: Path) -> tuple[str | None, list[dict[str, Any]]]:
    """The session id and entries of one whole file (``None`` and nothing when it is no Pi session).

    Through ``SessionTail``: a FIFO, a device or a folder is refused (``NotRegularFile``) before
    anything could block on it or read forever, and the file is read up to the size it had
    when it was opened. Raises ``OSError`` when it cannot be opened or read.
    """
    header, entries = read_session_file(path)
    return (header.id, entries) if header is not None else (None, [])


def read_session_file(path: Path) -> tuple[SessionHeader | None, list[dict[str, Any]]]:
    """``read_session_entries`` with the whole header (the cues need its cwd)."""
    reader = SessionReader()
    entries: list[dict[str, Any]] = []
    with SessionTail(path) as tail:
        tail.feed(0, lambda chunk: entries.extend(reader.feed(chunk)))
    if reader.header is None or reader.not_session:
        return None, []
    return reader.header, entries


def read_header(path: Path) -> SessionHeader | Literal[False] | None:
    """``path``'s header by Pi's rule (``session_header``), read without ever blocking.

    Anything but a regular file is "not a session" (``open_session``). Reading stops at the
    header, and never goes past the size the file had when it was opened. Raises ``OSError``
    when the file cannot be opened or read.
    """
    try:
        fd, st = open_session(path)
    except NotRegularFile:
        return False
    try:
        return session_header(_chunks(fd, st.st_size))
    finally:
        os.close(fd)


def known_header(path: Path) -> SessionHeader | None:
    """``read_header`` for those who only need sessions: ``None`` for anything else, unreadable included."""
    try:
        return read_header(path) or None
    except OSError:
        return None


def _chunks(fd: int, size: int) -> Iterator[bytes]:
    offset = 0
    while offset < size:
        chunk = read_range(fd, offset, min(HEADER_CHUNK, size - offset))
        if not chunk:
            return
        offset += len(chunk)
        yield chunk
