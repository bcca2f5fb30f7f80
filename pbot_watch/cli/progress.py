"""Progress bars for the long commands (``index``, ``reindex``, a query's first build): on a terminal only.

A person at a terminal wants to see a first run move; a script, a pipe or a service log wants
the summary line and nothing else. So the bar is drawn on stderr, and only when stderr is a
terminal; rich is imported only then (it costs more than the rest of a quick command).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class Bar:
    """One task's bar; ``update`` is a no-op when no terminal shows it."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress = progress
        self._task = task

    def update(self, done: float, total: float | None, what: str = "") -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done, total=total, what=what)


@contextmanager
def progress_bar(description: str, *, data: bool = False) -> Iterator[Bar]:
    """A transient bar on stderr while the block runs; ``data`` counts bytes (speed, MB), else items."""
    if not sys.stderr.isatty():
        yield Bar()
        return
    from rich.console import Console  # noqa: PLC0415 - only on a terminal
    from rich.progress import (  # noqa: PLC0415
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    amounts = [DownloadColumn(), TransferSpeedColumn()] if data else [MofNCompleteColumn()]
    columns = [TextColumn("{task.description}"), BarColumn(), *amounts, TextColumn("{task.fields[what]}")]
    with Progress(*columns, TimeRemainingColumn(), console=Console(stderr=True), transient=True) as progress:
        yield Bar(progress, progress.add_task(description, total=None, what=""))


@contextmanager
def bar_when_needed(description: str, *, data: bool = False) -> Iterator[Callable[[int, int, str], None]]:
    """``progress_bar``'s updates, the bar drawn from the first one on: a query that finds its
    index current (nearly every query) calls none, so it imports and draws nothing.
    """
    with ExitStack() as stack:
        bar: Bar | None = None

        def update(done: int, total: int, what: str = "") -> None:
            nonlocal bar
            if bar is None:
                bar = stack.enter_context(progress_bar(description, data=data))
            bar.update(done, total, what)

        yield update
