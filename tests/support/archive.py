"""What an archive folder holds, read back the way the tests compare it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def records(folder: Path) -> dict[str, dict[str, Any]]:
    """Every record in ``folder`` by session id; a torn file or a second file per session fails."""
    out: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_bytes())
        assert record["sessionId"] not in out, f"two records for session {record['sessionId']}"
        out[record["sessionId"]] = record
    return out


def archive_files(folder: Path) -> dict[str, bytes]:
    """Every record file by name, byte for byte (temporary files of an atomic write are not records)."""
    if not folder.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.suffix == ".json"}
