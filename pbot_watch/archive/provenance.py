"""Provenance: which machine and user wrote a record, as labels that are safe to share.

A workspace's records travel between a person's machines (git, Syncthing, rsync), so each
record says where it was first written: ``machine`` (a label from the settings, by default the
host's short name) and ``user`` (the login name). Labels, never paths. They are set when a
record is created and then kept: two machines indexing the same session would otherwise take
turns rewriting the record only to put their own name on it.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

FIELDS = ("machine", "user")


def default_machine() -> str:
    """The host's short name: stable across restarts, and not a secret.

    ``uname``'s node name is what ``socket.gethostname`` returns on Linux and macOS, without
    importing ``socket`` into every process that loads the settings (each query command).
    """
    return os.uname().nodename.split(".")[0] or "localhost"


def default_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def with_provenance(record: dict[str, Any], previous: dict[str, Any] | None, machine: str, user: str) -> None:
    """Put the record's provenance in place (before ``nodes``): the previous one, else these labels."""
    found = {k: previous[k] for k in FIELDS if previous and isinstance(previous.get(k), str)}
    labels = found or {"machine": machine, "user": user}
    nodes = record.pop("nodes")
    for key in FIELDS:
        record.setdefault(key, labels.get(key, ""))
    record["nodes"] = nodes


def without_provenance(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in FIELDS}
