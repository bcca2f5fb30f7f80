"""``pbot-watch summarize``: index, then run the summary queue now, in the foreground.

The same queue the service runs when the person is idle, with a progress bar on a terminal.
The first Ctrl-C cancels the model call in flight and stops after it (the node stays pending);
a second one stops at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from pbot_watch.cli import main
from pbot_watch.cli.errors import CommandError
from pbot_watch.cli.options import archive_options

if TYPE_CHECKING:
    from pbot_watch.summarize.queue import RunReport
    from pbot_watch.summarize.worker import SummaryWorker

EXIT_INTERRUPTED = 130


@contextmanager
def _cancel_on_sigint(cancel: threading.Event) -> Iterator[None]:
    """First Ctrl-C sets ``cancel``; the second one interrupts as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(sig: int, frame: FrameType | None) -> None:  # noqa: ARG001 - signal API
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        click.echo("pbot-watch: stopping after the current step (Ctrl-C again to quit now)", err=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@main.command("summarize")
@archive_options
@click.option(
    "--model", default=None, help="litellm model, e.g. openai/gpt-4o-mini. Default: config; none: offline."
)
@click.option("--api-base", default=None, help="OpenAI-compatible base URL for the model.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Stop once N summaries are written (cached ones count, failed ones do not; 0: only index). "
    "Model calls stay under max_calls_per_idle.",
)
@click.option(
    "--foreign",
    is_flag=True,
    default=None,
    help="Also summarize records with no session file on this machine (their text goes to your model).",
)
def summarize_command(
    sessions: tuple[Path, ...],
    archive: Path | None,
    model: str | None,
    api_base: str | None,
    limit: int | None,
    foreign: bool | None,
) -> None:
    """Index every session, then summarize pending nodes now (lowest level first)."""
    from pbot_watch.archive.files import ArchiveStore  # noqa: PLC0415 - keep `pbot-watch --help` light
    from pbot_watch.catalog import Catalog  # noqa: PLC0415
    from pbot_watch.config import load_settings  # noqa: PLC0415
    from pbot_watch.indexer import MissingRoot, index_all  # noqa: PLC0415
    from pbot_watch.summarize.worker import SummaryWorker, discover_folders  # noqa: PLC0415

    settings = load_settings(
        {
            "sessions": list(sessions),
            "archive": archive,
            "model": model,
            "api_base": api_base,
            "summarize_foreign": foreign,
        }
    )
    from pbot_watch.log import configure_logging  # noqa: PLC0415

    # The result line is the output; logs (failures, limits) go to stderr, quiet unless asked.
    configure_logging(
        settings, level="debug" if settings.log_level == "debug" else "warning", stream=sys.stderr
    )
    store = ArchiveStore(
        central=settings.archive,
        include=tuple(settings.include),
        exclude=tuple(settings.exclude),
        provenance=(settings.machine, settings.user),
    )
    catalog = Catalog.of(settings)
    try:
        report = index_all(settings.sessions, store, headers=catalog.cache)
    except MissingRoot as error:
        raise CommandError(f"{error}; pass --sessions DIR or set PI_CODING_AGENT_DIR") from error
    click.echo(report.line(), err=True)
    # The folders the service's worker would find (the headers were read by the pass above).
    folders = discover_folders(settings, catalog)
    worker = SummaryWorker(settings, folders=lambda: folders, archive=store)
    worker.remember_folders(folders)  # so the service, too, knows where these records live
    cancel = threading.Event()
    try:
        with _cancel_on_sigint(cancel):
            result = _run(worker, cancel, limit)
        status = worker.status()
        for warning in worker.store.warnings:
            click.echo(f"warning: {warning}", err=True)
    finally:
        worker.close()
    click.echo(_line(result, status))
    if result.stop == "cancelled":
        raise SystemExit(EXIT_INTERRUPTED)


def _run(worker: SummaryWorker, cancel: threading.Event, limit: int | None) -> RunReport:
    """One run of the queue; ``limit`` is ``--limit``, the number of summaries to write."""
    if not sys.stderr.isatty():
        return worker.run_once(cancel, limit)
    from rich.progress import Progress  # noqa: PLC0415 - only on a terminal

    with Progress(transient=True) as progress:
        task = progress.add_task("summarizing", total=None)

        def update(done: int, total: int, node: str) -> None:
            progress.update(task, completed=done, total=total, description=f"summarizing {node[-24:]}")

        return worker.run_once(cancel, limit, update)


def _line(result: RunReport, status: dict[str, object]) -> str:
    parts = [
        (
            f"{result.summarized} summaries written ({result.from_cache} from cache, {result.calls} model calls, "
            f"{result.input_tokens} input / {result.output_tokens} output tokens)"
        ),
        f"{result.failed} failed",
        f"{status.get('pending') or 0} pending",
    ]
    if result.dropped:
        parts.append(f"{result.dropped} dropped (records changed)")
    if status.get("foreign"):
        parts.append(f"{status['foreign']} foreign records left alone (--foreign summarizes them)")
    stop = {"done": "nothing left to do", "cancelled": "interrupted", "max-summaries": "--limit reached"}.get(
        result.stop, result.reason or result.stop
    )
    if result.stop == "refused":
        stop = "stopped: the model refuses requests (check the key, the model name and --api-base)"
    line = ", ".join(parts) + f"; {stop}"
    for error in result.errors[-3:]:
        line += f"\nerror: {error}"
    return line
