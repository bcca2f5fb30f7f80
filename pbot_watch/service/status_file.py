"""Reading the status file and judging whether the service runs, with the standard library only.

``pbot-watch status`` is a command people type to see whether the service is alive; it must
answer in a fraction of a second, so it reads ``status.json`` as plain JSON: importing pydantic
and building the ``Status`` model would cost more than everything else it does. The file's
format is the ``Status`` model of ``status.py`` (the service writes every field of it); this
module only knows where the file is, the few fields ``assess`` needs, and how long a beat is.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal, Protocol

from pbot_watch.service.lock import is_held

STATUS_FILE = "status.json"
# The service rewrites the file at least this often; ``status`` calls it stale after
# STALE_BEATS missed beats (a frozen or suspended process, or one killed with -9).
HEARTBEAT_SECONDS = 2.0
STALE_BEATS = 3
# The consumer thread proves it is not stuck by progressing: a tick, a piece of a file parsed, a
# record written. A heartbeat without progress for this long is a stuck service, not a busy one.
STUCK_SECONDS = 30.0

State = Literal["running", "stale", "not running"]

# The fields ``assess`` reads, with the types a status file must give them to be one.
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "running": bool,
    "pid": int,
    "heartbeat": str,
    "heartbeat_epoch": (int, float),
}


class StatusFacts(Protocol):
    """What ``assess`` reads: the ``Status`` model and ``StatusDocument`` both have it."""

    @property
    def running(self) -> bool: ...
    @property
    def pid(self) -> int: ...
    @property
    def heartbeat(self) -> str: ...
    @property
    def heartbeat_epoch(self) -> float: ...
    @property
    def heartbeat_seconds(self) -> float: ...
    @property
    def progress_epoch(self) -> float | None: ...
    @property
    def working_on(self) -> str | None: ...


class StatusDocument:
    """A status file as decoded JSON, with the fields ``assess`` needs as attributes."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def running(self) -> bool:
        return bool(self.data["running"])

    @property
    def pid(self) -> int:
        return int(self.data["pid"])

    @property
    def heartbeat(self) -> str:
        return str(self.data["heartbeat"])

    @property
    def heartbeat_epoch(self) -> float:
        return float(self.data["heartbeat_epoch"])

    @property
    def heartbeat_seconds(self) -> float:
        value = self.data.get("heartbeat_seconds")
        return float(value) if isinstance(value, (int, float)) else HEARTBEAT_SECONDS

    @property
    def progress_epoch(self) -> float | None:
        value = self.data.get("progress_epoch")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def working_on(self) -> str | None:
        value = self.data.get("working_on")
        return value if isinstance(value, str) else None


def status_path(state_dir: Path) -> Path:
    return state_dir / STATUS_FILE


def read_status_document(state_dir: Path) -> StatusDocument | None:
    """The status file, or ``None`` when there is none or it is not one (as ``read_status`` says).

    On a full disk the service overwrites the file in place, so a read can catch it half
    written: such a file is read once more before it counts as no status.
    """
    for attempt in range(2):
        try:
            data = json.loads(status_path(state_dir).read_bytes())
        except OSError:
            return None
        except ValueError:
            data = None
        if isinstance(data, dict) and all(
            isinstance(value := data.get(key), kind) and not (kind is int and isinstance(value, bool))
            for key, kind in _REQUIRED.items()
        ):
            return StatusDocument(data)
        if attempt == 0:
            time.sleep(0.05)
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def assess(state_dir: Path, status: StatusFacts | None, now: float | None = None) -> tuple[State, str]:
    """Whether the service runs, judged from its status file, its pid and its lock."""
    now = time.time() if now is None else now
    if status is None:
        if is_held(state_dir):
            return "stale", "the service holds its lock but has written no status yet"
        return "not running", "no status file (the service has not run yet)"
    if not status.running:
        return "not running", f"stopped at {status.heartbeat}"
    if not pid_alive(status.pid):
        return "not running", f"pid {status.pid} is gone (killed at about {status.heartbeat})"
    age = now - status.heartbeat_epoch
    if age > STALE_BEATS * status.heartbeat_seconds:
        return "stale", f"last heartbeat {age:.0f}s ago (pid {status.pid} is alive but not responding)"
    if not is_held(state_dir):
        return "stale", f"pid {status.pid} no longer holds the service lock"
    if status.progress_epoch is not None and now - status.progress_epoch > STUCK_SECONDS:
        doing = f" ({status.working_on})" if status.working_on else ""
        return "stale", (
            f"pid {status.pid} is alive but its reading thread made no progress for"
            f" {now - status.progress_epoch:.0f}s{doing}"
        )
    return "running", f"pid {status.pid}"


def roots_being_built(state_dir: Path, now: float | None = None) -> list[Path]:
    """The session roots of a running service still catching up, whose raw memory it is building.

    A query (the CLI, an MCP client) that read those session files itself would do the same
    work beside the service and answer no sooner; it answers from what raw memory holds and
    says what is missing. Empty when the service is not running, not responding, or caught up
    (a live append it has not stored yet is the query's to read, as without the service).
    """
    document = read_status_document(state_dir)
    if document is None or assess(state_dir, document, now)[0] != "running":
        return []
    catch_up = document.data.get("catch_up")
    if not isinstance(catch_up, dict) or catch_up.get("finished") is not None:
        return []
    roots = document.data.get("roots")
    if not isinstance(roots, list):
        return []
    return [
        Path(root["path"]) for root in roots if isinstance(root, dict) and isinstance(root.get("path"), str)
    ]
