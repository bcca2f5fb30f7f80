"""The status file: what the running service is doing, for ``pbot-watch status`` and people.

The service replaces ``state_dir/status.json`` atomically every few seconds and whenever
something visible changes; ``status`` only reads it, as plain JSON (``status_file.py``, which
also judges whether the service runs). This module is the file's format and its writing.
"""

from __future__ import annotations

import errno
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pbot_watch.archive.atomic import write_atomic
from pbot_watch.errors import bounded_value
from pbot_watch.redact.policy import scrub_json
from pbot_watch.service.status_file import HEARTBEAT_SECONDS, status_path

MAX_ERRORS = 20
MAX_WARNINGS = 50

Observer = Literal["inotify", "fsevents", "kqueue", "polling", "none"]
Activity = Literal["starting", "busy", "idle", "stopping", "stopped"]


class ObserverInfo(BaseModel):
    kind: str = "none"
    reason: str | None = Field(None, description="why the service polls instead of using inotify")


class RootInfo(BaseModel):
    path: str
    exists: bool
    watched: bool = Field(
        description="false while the folder does not exist yet (its nearest parent is watched)"
    )


class ErrorInfo(BaseModel):
    time: str
    message: str


class CatchUpInfo(BaseModel):
    """The start scan's reading: how far it is while catching up, what it took once caught up."""

    files_total: int = Field(description="files the start scan found new or changed")
    files_done: int
    bytes_total: int = Field(description="their sizes when the scan saw them")
    bytes_done: int
    started: str
    finished: str | None = Field(
        None, description="when the last of them was read and searchable; none while catching up"
    )
    seconds: float
    bytes_per_second: int | None = None
    eta_seconds: float | None = Field(None, description="time left at the rate so far; none once caught up")
    memory_files_total: int = Field(0, description="of files_total, those read for raw memory alone")
    memory_files_done: int = 0


class Status(BaseModel):
    """The status file's format (``state_dir/status.json``)."""

    model_config = ConfigDict(extra="ignore")

    running: bool
    pid: int
    version: str
    started: str
    uptime_seconds: float
    heartbeat: str
    heartbeat_epoch: float
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    progress_epoch: float | None = Field(
        None, description="the last time the reading thread made progress (a tick, a piece parsed, a record)"
    )
    working_on: str | None = Field(None, description="what the reading thread was doing at the heartbeat")
    observer: ObserverInfo = Field(default_factory=lambda: ObserverInfo(kind="none", reason=None))
    roots: list[RootInfo] = Field(default_factory=list)
    archive: str | None = Field(None, description="central archive folder, or none for per-workspace records")
    files_tracked: int = 0
    files_in_memory: int = 0
    sessions_tracked: int = 0
    workspaces_written: list[str] = Field(default_factory=list)
    records_written: int = 0
    records_unchanged: int = 0
    legacy_imported: int | None = Field(
        None,
        description="records copied from personal-bot's old user-level folder at start (none: no such folder)",
    )
    bytes_parsed_total: int = 0
    bytes_parsed_last_append: int = 0
    last_append: str | None = None
    last_append_path: str | None = None
    last_reconcile: str | None = None
    activity: Activity = "starting"
    pending_files: int = Field(0, description="files changed and waiting for their debounce or a batch")
    catch_up: CatchUpInfo | None = Field(
        None, description="reading what changed while the service was not running (all of it, on a first run)"
    )
    retrying_files: int = Field(
        0, description="files whose last read or record write failed; retried with backoff"
    )
    listener_backlog: int = Field(
        0, description="records written and not yet passed to the record listeners (the search index)"
    )
    state_error: str | None = Field(
        None, description="why cursors cannot be saved now (disk full, locked); retried with back-off"
    )
    unsaved_cursors: int = Field(0, description="cursor changes kept in memory until the state takes them")
    idle_worker: dict[str, Any] = Field(default_factory=dict)
    summaries: dict[str, Any] = Field(
        default_factory=dict, description="from the summary engine: pending, failed, model, usage today"
    )
    extensions: dict[str, dict[str, Any]] = Field(default_factory=dict, description="other status providers")
    errors: list[ErrorInfo] = Field(default_factory=list, description=f"the last {MAX_ERRORS} errors")
    warnings: list[str] = Field(default_factory=list, description="skipped workspaces, parentId cycles")

    @field_validator(
        "errors", "warnings", "state_error", "summaries", "extensions", "idle_worker", mode="before"
    )
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        # An error's text can hold a whole model answer: four 2 MB answers made a 10 MB status
        # file that ``status`` printed whole. Each text is cut to errors.MESSAGE_CHARS.
        if isinstance(value, list):
            value = [item.model_dump() if isinstance(item, BaseModel) else item for item in value]
        return bounded_value(value)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def write_status(state_dir: Path, status: Status) -> None:
    """Replace the status file atomically; on a full disk, overwrite it where it is.

    A full disk is when status matters most ("cannot save cursors: disk full"), and a new file
    needs free blocks. The old file's blocks are already allocated: the new status is written
    into them when it fits (a reader may then see a torn file; ``read_status`` reads again).
    """
    # Errors quote what failed, and that can be a session's text.
    document = scrub_json(status.model_dump(mode="json"))
    data = (json.dumps(document, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    path = status_path(state_dir)
    try:
        write_atomic(path, data)
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwrite_in_place(path, data):
            raise


def _overwrite_in_place(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        if len(data) > os.fstat(fd).st_blocks * 512:
            return False
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def read_status(state_dir: Path) -> Status | None:
    for attempt in range(2):
        try:
            return Status.model_validate_json(status_path(state_dir).read_bytes())
        except OSError:
            return None
        except ValidationError:
            if attempt == 0:
                time.sleep(0.05)  # caught mid-way through an in-place write: read it again
    return None
