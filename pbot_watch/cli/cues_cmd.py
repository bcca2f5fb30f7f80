"""``pbot-watch cues``: the memory cues of one session branch, as the Pi extension injects them."""

from __future__ import annotations

from pathlib import Path

import click

from pbot_watch.cli import main
from pbot_watch.cli.answer import emit
from pbot_watch.cli.errors import EXIT_USAGE, CommandError
from pbot_watch.cli.options import HiddenAliasOption
from pbot_watch.memory.cues import DEFAULT_CONTEXT_WINDOW
from pbot_watch.memory.models import CueState


@main.command("cues")
@click.option(
    "--session-file",
    "--session",  # the old spelling, accepted until the next release: search's --session is an id
    "session_file",
    cls=HiddenAliasOption,
    hidden_aliases=("--session",),
    required=True,
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The Pi session file (.jsonl).",
)
@click.option(
    "--leaf", metavar="ENTRY", help="The branch's leaf entry (default: the current leaf, as Pi loads it)."
)
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    default=DEFAULT_CONTEXT_WINDOW,
    show_default=True,
    metavar="TOKENS",
    help="The model's context window; above 20 % of it, old cues fade faster.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the cue state as JSON (see docs/pi.md).")
def cues_command(session_file: Path, leaf: str | None, context_window: int, as_json: bool) -> None:
    """The memory cues of a session branch after its latest compaction (none before the first).

    The [cues] settings of the config apply, as the Pi extension applies them.
    """
    from datetime import datetime  # noqa: PLC0415

    from pbot_watch.config import load_settings  # noqa: PLC0415
    from pbot_watch.memory.cue_follow import FollowedCues, NotASession, ledger_store  # noqa: PLC0415
    from pbot_watch.memory.cues import ledger_cues  # noqa: PLC0415

    settings = load_settings()
    cap = settings.cues.cap(context_window)  # as the Pi extension's child applies it

    if not session_file.exists():
        raise CommandError(f"{session_file}: no such file", EXIT_USAGE)
    if not session_file.is_file():
        raise CommandError(f"{session_file}: not a file (give a Pi session's .jsonl file)", EXIT_USAGE)
    try:  # a ledger read piece by piece: a marathon session's entries never live at once
        # From the ledger the service or the Pi child saved, if any: only what was appended is read.
        ledger = FollowedCues(ledger_store(settings.state_dir)).ledger(session_file)
    except NotASession as error:
        raise CommandError(f"{session_file}: not a Pi session (no session header)", EXIT_USAGE) from error
    except OSError as error:
        raise CommandError(f"{session_file}: {error.strerror or error}", EXIT_USAGE) from error
    local = datetime.now().astimezone().tzinfo
    assert local is not None
    state = ledger_cues(ledger, leaf=leaf, context_window=context_window, tz=local, max_tokens=cap)
    emit(state, as_json, render_cues)


def render_cues(state: CueState) -> None:
    if state.text:
        click.echo(state.text)
    elif state.batch == 0:
        click.echo("no cues: no compaction on this branch")
    elif state.max_tokens == 0:
        click.echo("no cues: [cues] in the config disables them")
    else:
        click.echo(f"no cues: nothing of the tool work left at {state.batch} compaction(s) is still cued")
