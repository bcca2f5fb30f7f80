"""personal-bot's user-level records move into their workspaces, as pbot 0.2.3 moves them.

Before 0.2.3, pbot kept every record in ``<Pi agent dir>/pbot/history/``, each with the
``workspace`` it belongs to and the ``file`` of its session. pbot 0.2.3, on load, copies the
records of its workspace into ``<workspace>/.pi/pbot/history/`` when that folder has no record
of the session yet, leaves the old copies where they are, and drops ``file`` from the
workspace's records. pbot-watch does the same for every workspace at once, before a pass
indexes the sessions: the pass then finds the copied record by its ``sessionId`` and keeps
its record id and its ready summaries (paid for with model calls), and a session whose file is
gone stays searchable from its copy. With a central archive, the records are copied into it
(they already have its format: a record with its ``workspace``).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pbot_watch.archive.files import (
    LEGACY_FIELDS,
    ArchiveStore,
    WorkspaceSkipped,
    read_record,
    record_file_name,
)

LEGACY_SUBDIR = Path("pbot") / "history"
SESSIONS = "sessions"
# A key, not text: inside a JSON string a quote is escaped, so this matches only a key.
_LEGACY_KEY = re.compile(rb'"(?:' + b"|".join(n.encode() for n in LEGACY_FIELDS) + rb')"\s*:')


@dataclass
class LegacyReport:
    """What one import did; ``imported`` shows in the ``index`` line and in ``status``."""

    imported: int = 0
    cleaned: int = 0
    imported_paths: list[tuple[Path, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, other: LegacyReport) -> None:
        self.imported += other.imported
        self.cleaned += other.cleaned
        self.imported_paths += other.imported_paths
        self.warnings += other.warnings


def legacy_folders(roots: Iterable[Path]) -> list[Path]:
    """The old user-level record folder of each agent dir whose ``sessions`` folder is watched.

    Pi keeps sessions in ``<agent dir>/sessions``, pbot kept its records in
    ``<agent dir>/pbot/history``; a session root named otherwise belongs to no agent dir.
    """
    found: dict[Path, None] = {}
    for root in roots:
        if root.name == SESSIONS:
            folder = root.parent / LEGACY_SUBDIR
            if folder.is_dir():
                found.setdefault(folder, None)
    return list(found)


def _without(record: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    drop = set(names)
    return {key: value for key, value in record.items() if key not in drop}


def import_legacy(folders: Iterable[Path], store: ArchiveStore) -> LegacyReport:
    """Copy each legacy record into its workspace's folder (or the central archive) when missing there.

    A record of a session the folder already holds is left alone: the folder's record is the
    newer one (pbot and pbot-watch write there). A damaged legacy file is a warning; the others
    are still imported. The legacy folder itself is only read.
    """
    report = LegacyReport()
    skipped: dict[str, str] = {}
    for folder in folders:
        try:
            paths = sorted(folder.glob("*.json"))
        except OSError as error:
            report.warnings.append(f"pbot's old history {folder}: cannot list: {error.strerror}")
            continue
        for path in paths:
            record = read_record(path)
            workspace = record.get("workspace") if record is not None else None
            if record is None or not isinstance(record.get("name"), str):
                report.warnings.append(f"pbot's old history {path}: not a readable record, left as it is")
                continue
            if not isinstance(workspace, str):
                continue  # a record of no workspace: pbot imports it nowhere either
            if workspace in skipped:
                continue
            try:
                target = store.folder_for(workspace)
            except WorkspaceSkipped as why:
                skipped[workspace] = str(why)
                continue
            if store.find(target, record["sessionId"]) is not None:
                continue
            keep = LEGACY_FIELDS if store.central is not None else (*LEGACY_FIELDS, "workspace")
            copy = _without(record, keep)
            destination = target / record_file_name(copy["id"])
            if destination.exists():
                report.warnings.append(
                    f"pbot's old history {path}: {destination} holds another session, not imported"
                )
                continue
            try:
                store.write(destination, copy)
            except OSError as error:
                report.warnings.append(f"cannot import {path} into {target}: {error}")
                continue
            store.remembered(target, copy["sessionId"], destination)
            report.imported += 1
            report.imported_paths.append((destination, copy["sessionId"]))
    report.warnings += [
        f"pbot's old history: {why}; its records stay where they are" for why in skipped.values()
    ]
    return report


def drop_legacy_fields(
    store: ArchiveStore, folders: Iterable[Path], saved: Container[str] = ()
) -> LegacyReport:
    """Remove ``file`` from the records in ``folders``, keeping every node and summary.

    A pass rewrites a record without ``file`` whenever it saves its session, so the records of
    ``saved`` sessions are not read again; this reaches the others (sessions whose files are
    gone), as pbot's load does. Only a file that holds a ``"file"`` key is parsed.
    """
    report = LegacyReport()
    for folder in folders:
        for session_id, path in sorted(store.records_in(folder).items()):
            if session_id in saved:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if _LEGACY_KEY.search(data) is None:
                continue
            record = read_record(path)
            if record is None or not any(name in record for name in LEGACY_FIELDS):
                continue
            try:
                store.write(path, _without(record, LEGACY_FIELDS))
            except OSError as error:
                report.warnings.append(f"cannot remove the legacy file field from {path}: {error}")
                continue
            report.cleaned += 1
    return report
