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
T = TypeVar("T")


def answering(
    sessions: tuple[Path, ...],
    archive: Path | None,
    answer: Callable[[QueryContext], T],
    *,
    history: bool = False,
    memory: bool = False,
    human: bool = False,
) -> T:
    """``answer`` under ``--sessions``/``--archive`` (``query.run_query``), the errors a person must correct mapped.

    ``human``: the result is for a person to read, so pbot's role labels are shown in their
    language (``display.py``); ``--json`` keeps the records' text as it is.
    """
    from pbot_watch.display import language, relabel_model  # noqa: PLC0415 - keep --help fast
    from pbot_watch.query import resolve_settings, run_query  # noqa: PLC0415 - keep --help fast

    with query_errors():
        settings = resolve_settings(sessions, archive)
        result = run_query(settings, answer, history=history, memory=memory)
    return relabel_model(result, language(settings.display_labels)) if human else result


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
    """``--json`` prints the documented shape (docs/search.md); otherwise the human rendering.

    Text from sessions can hold half a character (a lone surrogate: an emoji cut by a length
    limit). The JSON writes it as ``JSON.stringify`` does, an escape, so nothing is lost; a
    person reading a terminal sees U+FFFD in its place.
    """
    from pbot_watch.history.jstext import dumps, to_well_formed  # noqa: PLC0415 - keep --help fast
    from pbot_watch.redact.policy import scrub, scrub_json  # noqa: PLC0415 - keep --help fast

    # The indexes hold redacted text; this catches what an index built before redaction still holds.
    if as_json:
        click.echo(dumps(scrub_json(result.model_dump(mode="json", by_alias=True)), indent=2))
    else:
        render(_strings_mapped(result, lambda text: to_well_formed(scrub(text))))


def _strings_mapped(value: T, change: Callable[[str], str]) -> T:
    """``value`` with ``change`` applied to every string (for the terminal: secrets redacted and lone
    surrogates made U+FFFD), models copied, not re-validated.

    Not a round trip through ``model_dump``: some fields are written under another name than
    they are read by (``CueLine.cue_class`` as ``class``).
    """
    if isinstance(value, str):
        return change(value)  # type: ignore[return-value]  # T is str here
    if isinstance(value, BaseModel):
        fields = {name: _strings_mapped(getattr(value, name), change) for name in type(value).model_fields}
        return value.model_copy(update=fields)
    if isinstance(value, list):
        return [_strings_mapped(item, change) for item in value]  # type: ignore[return-value]  # T is a list here
    if isinstance(value, dict):
        return {key: _strings_mapped(item, change) for key, item in value.items()}  # type: ignore[return-value]  # T is a dict
    return value
