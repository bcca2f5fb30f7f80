"""``pbot-watch secrets scan`` and ``scrub``: what an existing archive still holds, and removing it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.options import archive_options

if TYPE_CHECKING:  # keep --help fast
    from collections.abc import Iterator

    from pbot_watch.config import Settings
    from pbot_watch.redact.audit import Leak


@main.group("secrets")
def secrets_group() -> None:
    """Secrets in the archive and the search index: report them (scan) or remove them (scrub)."""


def _settings(sessions: tuple[Path, ...], archive: Path | None) -> Settings:
    from pbot_watch.query import settings_for_query  # noqa: PLC0415

    return settings_for_query(sessions, archive)  # a bad setting: exit 2, as from every command


def _record_paths(settings: Settings) -> list[Path]:
    from pbot_watch.catalog import Scope  # noqa: PLC0415
    from pbot_watch.query import open_index  # noqa: PLC0415
    from pbot_watch.search.discover import record_folders  # noqa: PLC0415

    index = open_index(settings)
    try:
        # Every record on disk is audited, an excluded workspace's too: a leak there is still one.
        folders = record_folders(index, settings.sessions, Scope(archive=settings.archive))
    finally:
        index.close()
    return sorted(path for folder in folders for path in folder.path.glob("*.json"))


def _scan(settings: Settings) -> tuple[list[Leak], list[Leak]]:
    """Leaks in the records, and in the search index file, each read as it is."""
    from pbot_watch.archive.files import read_record  # noqa: PLC0415
    from pbot_watch.redact.audit import record_leaks  # noqa: PLC0415
    from pbot_watch.search.index import SearchIndex  # noqa: PLC0415

    records = [
        leak
        for path in _record_paths(settings)
        if (record := read_record(path)) is not None
        for leak in record_leaks(path, record)
    ]
    db = SearchIndex.default_path(settings.state_dir)
    indexed = list(index_leaks(db)) if db.is_file() else []
    return records, indexed


def index_leaks(db: Path) -> Iterator[Leak]:
    """What the search index file holds, read as it is: history's texts, then raw memory's."""
    import sqlite3  # noqa: PLC0415

    from pbot_watch.memory.index import held_memory_texts  # noqa: PLC0415
    from pbot_watch.redact.audit import held_leaks  # noqa: PLC0415
    from pbot_watch.search.index import held_history_texts  # noqa: PLC0415

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        yield from held_leaks(held_history_texts(conn))
        yield from held_leaks(held_memory_texts(conn))
    finally:
        conn.close()


@secrets_group.command("scan")
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON: every place, its ids and the kinds found.")
def scan_command(sessions: tuple[Path, ...], archive: Path | None, *, as_json: bool) -> None:
    """Report which redaction rules match in records, the history index and the memory index.

    Ids and counts only, never a value. Exits 1 when anything was found, 0 when clean.
    """
    from pbot_watch.redact.audit import total  # noqa: PLC0415

    records, indexed = _scan(_settings(sessions, archive))
    leaks = records + indexed
    if as_json:
        document = {"clean": not leaks, "kinds": total(leaks), "found": [leak.as_json() for leak in leaks]}
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        for leak in leaks:
            kinds = ", ".join(f"{kind} {count}" for kind, count in leak.kinds.items())
            where = f"node {leak.item_id}" if leak.place != "memory index" else f"entry {leak.item_id}"
            if not leak.item_id:
                where = "session name"
            click.echo(f"{leak.place}: session {leak.session_id} {where}: {kinds}  ({leak.path})")
        summary = ", ".join(f"{kind} {count}" for kind, count in total(leaks).items())
        click.echo(f"{len(leaks)} places hold secrets: {summary}" if leaks else "no secrets found")
    raise SystemExit(1 if leaks else 0)


@secrets_group.command("scrub")
@archive_options
def scrub_command(sessions: tuple[Path, ...], archive: Path | None) -> None:
    """Redact every record that holds a secret (ids, tree and summaries kept) and rebuild the index.

    The search index is derived data: when it holds a secret it is removed with its -wal file and
    built again from the redacted records and session files, so no old page keeps the text. Stop
    the service first (``pbot-watch service stop``): it keeps the index open.
    """
    from pbot_watch.archive.atomic import write_atomic  # noqa: PLC0415
    from pbot_watch.archive.files import read_record  # noqa: PLC0415
    from pbot_watch.catalog import Scope  # noqa: PLC0415
    from pbot_watch.history.jstext import dumps_utf8  # noqa: PLC0415
    from pbot_watch.memory.index import rebuild_memory  # noqa: PLC0415
    from pbot_watch.query import open_index  # noqa: PLC0415
    from pbot_watch.redact.audit import scrubbed_record  # noqa: PLC0415
    from pbot_watch.search.database import index_path, start_afresh  # noqa: PLC0415
    from pbot_watch.search.discover import record_folders  # noqa: PLC0415

    settings = _settings(sessions, archive)
    records, indexed = _scan(settings)
    rewritten = 0
    for path in sorted({Path(leak.path) for leak in records}):
        record = read_record(path)
        if record is not None:
            write_atomic(path, dumps_utf8(scrubbed_record(record)) + b"\n")
            rewritten += 1
    rebuilt = bool(indexed or records)
    if rebuilt:
        start_afresh(index_path(settings.state_dir))  # nothing of the old index may keep a secret
        index = open_index(settings)
        try:
            index.rebuild(record_folders(index, settings.sessions, Scope(archive=settings.archive)))
            rebuild_memory(index, [root for root in settings.sessions if root.is_dir()])
        finally:
            index.close()
    click.echo(
        f"{rewritten} records rewritten; search index "
        + ("removed and rebuilt" if rebuilt else "clean, left as it is")
    )
