"""Expected command failures: one line on stderr and a named exit code."""

from __future__ import annotations

import click

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_NOT_FOUND = 4


class CommandError(click.ClickException):
    """An error the person can act on; shown as ``pbot-watch: message``, no traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc] # click declares a class default; each error picks its own

    def show(self, file: object = None) -> None:  # noqa: ARG002 - click's signature
        click.echo(f"pbot-watch: {self.format_message()}", err=True)
