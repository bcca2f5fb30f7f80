"""Expected command failures: one line on stderr and a named exit code (``pbot_watch.errors``)."""

from __future__ import annotations

import click

from pbot_watch.errors import EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_NOT_RUNNING, EXIT_USAGE, PbotWatchError

__all__ = ["EXIT_FAILURE", "EXIT_NOT_FOUND", "EXIT_NOT_RUNNING", "EXIT_USAGE", "CommandError"]


class CommandError(PbotWatchError, click.ClickException):
    """An error the person can act on; shown as ``pbot-watch: message``, no traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: object = None) -> None:  # noqa: ARG002 - click's signature
        click.echo(f"pbot-watch: {self.format_message()}", err=True)
