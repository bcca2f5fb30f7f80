"""Options every command shares, so a central archive is searched as easily as workspaces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def archive_options(func: F) -> F:
    """``--sessions DIR`` (repeatable) and ``--archive DIR``."""
    func = click.option(
        "--archive",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Write/read records in this central folder instead of each workspace's .pi/pbot/history.",
    )(func)
    return click.option(
        "--sessions",
        "sessions",
        multiple=True,
        type=click.Path(path_type=Path, file_okay=False),
        help="A Pi session root to read (repeatable). Default: ${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions.",
    )(func)
