"""Each session file's parsed state on disk, kept as its cursor moves, so a dropped file resumes.

The tailer holds a bounded number of parsed files (``service/tail.py``). Without this, a file
it had dropped was read again from byte 0 at its next append: the first append to any session
after a start or a catch-up, and every append to a big session sharing the budget with a busier
one, cost the whole file. Here every saved cursor gets a frame in the file's log (the steps
its read added, ``history/resume.py``), so such an append resumes from the log at the saved
cursor and parses only its own bytes.

The logs are a cache: nothing is fsynced, and anything wrong with one (torn, foreign, another
version, a cursor it does not reach, a write that failed) means only that its file is read
from 0, as before. A log is rewritten whole when its file was read again from 0 (a rewrite);
otherwise frames are appended, so keeping it costs what each read added. Files live in
``<state>/resume/`` under a hash of their session file's path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import weakref
from dataclasses import dataclass
from pathlib import Path

import structlog

from pbot_watch.archive.atomic import ensure_dir, write_atomic
from pbot_watch.history.project import SessionFile
from pbot_watch.history.resume import Unencodable, frame, resume
from pbot_watch.pi.cursor import Cursor
from pbot_watch.sources import WHOLE_BLOCK, WholeDigest, read_header

RESUME_FOLDER = "resume"

log = structlog.get_logger("pbot_watch.service")


@dataclass
class _Logged:
    """What the log of one file holds: for which state object, how many steps, where it ends."""

    state: weakref.ref[SessionFile]
    steps: int
    size: int
    offset: int
    raw: int
    """The log's frames before compression: about the steps' size (the tailer's memory estimate)."""
    blocks: int | None = None
    """How many of the file's block digests the log holds (``None``: not a known sequence)."""


class ResumeStore:
    """The logs of one service's session files; used from the consumer thread only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._logged: dict[Path, _Logged] = {}
        self.resumed = 0
        """Files brought back from their log instead of being read from 0."""

    def log_path(self, path: Path) -> Path:
        key = hashlib.blake2b(os.fsencode(path), digest_size=16).hexdigest()
        return self.folder / f"{key}.steps"

    def load(self, path: Path, cursor: Cursor) -> tuple[SessionFile, WholeDigest | None] | None:
        """``path``'s state read up to ``cursor``, from its log, and the file's running digest at
        ``cursor`` when the log holds its blocks; ``None``: read it from 0.
        """
        try:
            data = self.log_path(path).read_bytes()
        except OSError:
            return None
        if not data:
            return None
        try:
            header = read_header(path)
        except OSError:
            return None
        if not header:
            return None
        found = resume(data, cursor, header)
        if found is None:
            return None
        state = found.state
        blocks = found.blocks
        if blocks is not None and len(blocks) * WHOLE_BLOCK > cursor.offset:
            blocks = None
        self._logged[path] = _Logged(
            weakref.ref(state),
            len(state.tree.steps),
            found.log_bytes,
            cursor.offset,
            found.raw_bytes,
            None if blocks is None else len(blocks),
        )
        self.resumed += 1
        return state, None if blocks is None else WholeDigest(blocks)

    def save(self, path: Path, state: SessionFile, cursor: Cursor, whole: WholeDigest | None = None) -> None:
        """Bring ``path``'s log to ``state`` read up to ``cursor``: a frame appended, or the log anew.

        ``whole``: the file's running digest, whose new block digests go into the frame.
        """
        logged = self._logged.get(path)
        fresh = logged is None or logged.state() is not state
        if not fresh and logged is not None and logged.offset == cursor.offset:
            return
        first = 0 if fresh or logged is None else logged.steps
        # The blocks the log lacks; all of them again when it did not know where they stood.
        first_block = 0 if fresh or logged is None or logged.blocks is None else logged.blocks
        known = whole is not None and whole.upto == cursor.offset and first_block <= len(whole.blocks)
        blocks = whole.blocks[first_block:] if known and whole is not None else None
        target = self.log_path(path)
        try:
            data, raw = frame(state, cursor, first, blocks, first_block)
            if fresh or logged is None:
                ensure_dir(self.folder)  # 0700: the logs hold (redacted) conversation text
                write_atomic(target, data, sync_dir=False)  # 0600; a cache: no fsync of the folder
                size = len(data)
            else:
                raw += logged.raw
                with target.open("r+b") as out:
                    out.truncate(logged.size)  # frames past the cursor it resumed at are stale
                    out.seek(logged.size)
                    out.write(data)
                size = logged.size + len(data)
        except (OSError, Unencodable) as error:
            log.debug("resume_log_not_written", path=str(path), error=str(error))
            self.forget(path)
            return
        self._logged[path] = _Logged(
            weakref.ref(state),
            len(state.tree.steps),
            size,
            cursor.offset,
            raw,
            None if blocks is None else first_block + len(blocks),
        )

    def logged_bytes(self, path: Path, state: SessionFile) -> int | None:
        """The uncompressed size of the log that stands for ``state`` (``None``: it has none yet)."""
        logged = self._logged.get(path)
        return logged.raw if logged is not None and logged.state() is state else None

    def forget(self, path: Path) -> None:
        """``path`` is gone, or its log cannot be trusted: the log goes too."""
        self._logged.pop(path, None)
        with contextlib.suppress(OSError):
            self.log_path(path).unlink(missing_ok=True)
