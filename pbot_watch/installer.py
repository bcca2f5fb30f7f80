"""The one shape of an installer: a plan rendered purely, then files written and commands run.

``pbot-watch service install`` (``service/install.py``: a systemd unit or a launchd agent) and
``pbot-watch pi install`` (``pi_bridge/install.py``: the Pi package) do the same three things:
render a plan that touches nothing (so ``--print`` shows exactly what would happen and tests
check it without a service manager or Pi), write the files whose text changed, and run
commands (``systemctl``, ``launchctl``, ``pi``) whose failures become part of the outcome,
never an exception: the person is told what was done and what is left to do by hand. What
each plan holds stays its own (a unit and its steps; a package folder and one ``pi`` call);
how a file is written, how a command runs and how a failed step stops the rest is here.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pbot_watch.archive.atomic import write_atomic


class Step(BaseModel):
    """One command of an install or uninstall; ``required`` steps stop the sequence when they fail."""

    model_config = ConfigDict(frozen=True)

    argv: list[str]
    required: bool = True
    why: str = ""

    def shell(self) -> str:
        return " ".join(shlex.quote(arg) for arg in self.argv)


class StepResult(BaseModel):
    step: Step
    returncode: int
    output: str


@dataclass(frozen=True)
class Ran:
    """A finished command: its exit code (-1: it could not start or timed out) and what it said."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return (self.stdout + self.stderr).strip()


def run_command(argv: list[str], *, timeout: float, cwd: Path | None = None) -> Ran:
    """Run ``argv`` (no shell), capturing its output; a missing program or a timeout is exit -1."""
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return Ran(-1, "", str(error))
    return Ran(done.returncode, done.stdout, done.stderr)


def run_steps(steps: list[Step], *, timeout: float) -> tuple[list[StepResult], StepResult | None, list[Step]]:
    """Run steps in order; stop at the first required one that fails and return what is left."""
    ran: list[StepResult] = []
    for index, step in enumerate(steps):
        done = run_command(step.argv, timeout=timeout)
        result = StepResult(step=step, returncode=done.returncode, output=done.output)
        ran.append(result)
        if result.returncode != 0 and step.required:
            return ran, result, steps[index:]
    return ran, None, []


def read_text(path: Path) -> str | None:
    """An installed file's text, or ``None`` when there is none (so "changed" is one comparison)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def write_file(path: Path, text: str, mode: int) -> None:
    """Write an installed file atomically with exactly ``mode`` (its folder is the plan's to make)."""
    write_atomic(path, text.encode("utf-8"), mode=mode)
