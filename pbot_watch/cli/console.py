"""The rich console of human output (rich is imported on first use, to keep ``--help`` fast)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def human_console() -> Console:
    """A console that wraps at the terminal's width on a terminal, and never when piped.

    rich wraps at 80 columns when stdout is no terminal: ``pbot-watch search X | grep Y`` would
    split a hit over lines, and a file would hold lines cut where no terminal was.
    """
    from rich.console import Console  # noqa: PLC0415

    console = Console()
    if not console.is_terminal:
        console.soft_wrap = True
    return console
