"""One machine of a person or a team, in a test: its own home, state, config, Pi folder and service.

Tests of several machines (archives merged by rsync, pushes to a team database) need each side
to be a separate user with its own service subprocess and its own CLI environment; this is that
home, made once. What a machine is configured with (its ``config.toml``) is the test's own.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run, scratch_user
from tests.support.service import ServiceProcess


class ScratchMachine:
    """``root/name``: a home whose Pi sessions the machine's service watches, and whose CLI a test runs."""

    def __init__(
        self, root: Path, name: str, workspace: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.home = root / name
        for sub in ("state", "config", "cache"):
            (self.home / sub).mkdir(parents=True)
        self.workspace = workspace
        self.workspace.mkdir(parents=True)
        self.env = {**scratch_user(self.home), **(extra_env or {})}
        self.sessions = self.home / ".pi" / "agent" / "sessions"
        self.service = ServiceProcess(
            [self.sessions],
            None,
            log=self.home / "service.log",
            state_dir=self.home / "state" / "pbot-watch",
            env=self.env,
        )

    @property
    def config_file(self) -> Path:
        return self.home / "config" / "pbot-watch" / "config.toml"

    def cli(self, *args: str, timeout: float = 120) -> str:
        """``pbot-watch ARGS`` as this machine's user; its stdout, after asserting it succeeded."""
        done = run(*args, env=self.env, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return done.stdout
