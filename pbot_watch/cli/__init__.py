"""The command line: thin click commands that call one package function each.

Every command module registers itself on ``main``; importing this package must stay cheap
(no litellm, no watchdog, no sqlite work), because ``status``, ``search`` and ``read`` are
meant to answer in a fraction of a second.
"""

from __future__ import annotations

from typing import Any

import click

from pbot_watch import __version__
from pbot_watch.cli.errors import EXIT_FAILURE, CommandError


class _Group(click.Group):
    """The ``pbot-watch`` group: what any command may meet in its environment is one line, too."""

    def invoke(self, ctx: click.Context) -> Any:
        from pbot_watch.sqlite import SQLiteTooOld  # noqa: PLC0415 - importing the group stays cheap

        try:
            return super().invoke(ctx)
        except SQLiteTooOld as error:  # the first database a command opens checks the library
            raise CommandError(str(error), EXIT_FAILURE) from error


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pbot-watch")
def main() -> None:
    """A long memory for the Pi coding agent: archive, summarize and search Pi sessions."""


def _register() -> None:
    # Imported here, not at the top, so each module can import ``main`` without a cycle.
    from pbot_watch.cli import (  # noqa: F401, PLC0415
        config_cmd,
        cues_cmd,
        index_cmd,
        mcp_cmd,
        memory_cmd,
        pi_cmd,
        read_cmd,
        reindex_cmd,
        run_cmd,
        search_cmd,
        service_cmd,
        status_cmd,
        summarize_cmd,
    )


_register()
