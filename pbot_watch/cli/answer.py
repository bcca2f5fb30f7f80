"""What the query commands (search, read, memory search, recall) share at the edge."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click
from pydantic import BaseModel

from pbot_watch.cli import query_process

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
    """``answer`` under ``--sessions``/``--archive`` (``query.run_query``).

    ``human``: the result is for a person to read, so pbot's role labels are shown in their
    language (``display.py``); ``--json`` keeps the records' text as it is. A query or setting
    to correct ends the command with one stderr line and exit 2, an unknown id or handle with
    exit 4: ``pbot_watch.errors.exit_code``, applied by the command group.
    """
    from pbot_watch.cli.progress import bar_when_needed  # noqa: PLC0415 - keep --help fast
    from pbot_watch.display import language, relabel_model  # noqa: PLC0415 - keep --help fast
    from pbot_watch.query import run_query, settings_for_query  # noqa: PLC0415 - keep --help fast

    query_process.imported()  # what answers is imported: the query's own garbage is collected as usual
    settings = settings_for_query(sessions, archive)
    with bar_when_needed("reading sessions", data=True) as progress:
        result = run_query(settings, answer, history=history, memory=memory, progress=progress)
    return relabel_model(result, language(settings.display_labels)) if human else result


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
