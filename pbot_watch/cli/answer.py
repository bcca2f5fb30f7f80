"""What the query commands (search, read, memory search, recall) share at the edge."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click
from pydantic import BaseModel

from pbot_watch.cli.errors import EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from pbot_watch.config import SettingsError
from pbot_watch.search.errors import QueryError, UnknownHandle, UnknownNode

if TYPE_CHECKING:
    from pbot_watch.query import QueryContext

M = TypeVar("M", bound=BaseModel)


@contextmanager
def querying(
    sessions: tuple[Path, ...], archive: Path | None, *, history: bool = False, memory: bool = False
) -> Iterator[QueryContext]:
    """The query context under ``--sessions``/``--archive``, with the errors a person must correct mapped."""
    from pbot_watch.query import open_query, resolve_settings  # noqa: PLC0415 - keep --help fast

    with (
        query_errors(),
        open_query(resolve_settings(sessions, archive), history=history, memory=memory) as context,
    ):
        yield context


@contextmanager
def query_errors() -> Iterator[None]:
    """A query or setting the caller must correct: one stderr line, exit 4 for an unknown id, else 2."""
    try:
        yield
    except (UnknownNode, UnknownHandle) as error:
        raise CommandError(str(error), EXIT_NOT_FOUND) from error
    except (QueryError, SettingsError) as error:
        raise CommandError(str(error), EXIT_USAGE) from error


def emit(result: M, as_json: bool, render: Callable[[M], None]) -> None:
    """``--json`` prints the documented shape (docs/search.md); otherwise the human rendering."""
    if as_json:
        click.echo(result.model_dump_json(by_alias=True, indent=2))
    else:
        render(result)
