"""Options every command shares, so a central archive is searched as easily as workspaces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


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


# The query commands' options that mean the same thing in each, declared once.


def match_option(explain: str) -> Callable[[F], F]:
    """``--match literal|terms``; ``explain`` says what each mode matches in this command."""
    return click.option(
        "--match",
        type=click.Choice(["literal", "terms"]),
        default="literal",
        show_default=True,
        help=explain,
    )


session_option = click.option("--session", "session_id", help="Only this Pi session id.")
limit_option = click.option("--limit", type=click.IntRange(1, 50), default=20, show_default=True)


def json_option(what: str) -> Callable[[F], F]:
    """``--json``: print ``what`` (the result, the page) as the documented JSON shape."""
    return click.option(
        "--json", "as_json", is_flag=True, help=f"Print the {what} as JSON (see docs/search.md)."
    )


class HiddenAliasOption(click.Option):
    """An option that still accepts an old spelling for one release, shown nowhere.

    ``--help`` and the "missing option" hint name only the current spelling, so nobody learns
    the old one; scripts written against it keep working until it is removed.
    """

    def __init__(self, *args: Any, hidden_aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = hidden_aliases

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        return self._without_aliases(lambda: super(HiddenAliasOption, self).get_help_record(ctx))

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return self._without_aliases(lambda: super(HiddenAliasOption, self).get_error_hint(ctx))

    def _without_aliases(self, render: Callable[[], T]) -> T:
        shown, self.opts = self.opts, [opt for opt in self.opts if opt not in self.hidden_aliases]
        try:
            return render()
        finally:
            self.opts = shown
