"""The one shape of an installer: a plan rendered purely, then files written and commands run.

``pbot-watch service install`` (``service/install.py``: a systemd unit or a launchd agent) and
``pbot-watch pi install`` (``pi_bridge/install.py``: the Pi package) do the same things: make a
:class:`Plan` that touches nothing (so ``--print`` shows exactly what would happen and tests
check it without a service manager or Pi), write the files whose text changed, remove what an
uninstall removes, and run commands (``systemctl``, ``launchctl``, ``pi``) whose failures
become part of the :class:`Outcome`, never an exception: the person is told what was done and
what is left to do by hand. Both installers print a plan with :func:`would_do` and an outcome
with :func:`did`, so "would write / wrote", "would run / ran" read alike everywhere. What each
installer decides stays its own (which steps, when a failure stops the rest, what a failed
``pi remove`` means); how a file is written and how a command runs is here.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pbot_watch.archive.atomic import ensure_dir, write_atomic


class Step(BaseModel):
    """One command of an install or uninstall; ``required`` steps stop the sequence when they fail."""

    model_config = ConfigDict(frozen=True)

    argv: list[str]
    required: bool = True
    why: str = ""

    def shell(self) -> str:
        return " ".join(shlex.quote(arg) for arg in self.argv)


class StepResult(BaseModel):
    """A step that ran; ``note`` is the installer's reading of it (``it was not installed``)."""

    step: Step
    returncode: int
    output: str
    note: str = ""

    def failure(self, *, said_last: bool = False) -> str:
        """One line for a failed step: the command, its exit code and what it said first
        (systemctl's reason) or, with ``said_last``, last (npm's and Pi's).
        """
        lines = [line for line in self.output.splitlines() if line.strip()] or ["no output"]
        return (
            f"`{self.step.shell()}` failed (exit {self.returncode}): {lines[-1] if said_last else lines[0]}"
        )


class PlannedFile(BaseModel):
    """A file an install writes, with the text and mode it gets."""

    model_config = ConfigDict(frozen=True)

    path: Path
    text: str
    mode: int


class Plan(BaseModel):
    """What one install or uninstall would do, in this order: ``before`` steps, the files
    written and the paths removed, then the ``after`` steps; and what to tell the person.
    """

    model_config = ConfigDict(frozen=True)

    before: list[Step] = []
    write: list[PlannedFile] = []
    remove: list[Path] = []
    after: list[Step] = []
    hints: list[str] = []

    @property
    def steps(self) -> list[Step]:
        return [*self.before, *self.after]


class Outcome(BaseModel):
    """What an install or uninstall did, and what is left for the person to do.

    ``tool_missing``: the command the steps need is not on this machine, so none ran and all
    are ``next_steps``; ``failed``: the required step that stopped the rest, which are left.
    """

    plan: Plan
    written: list[Path] = []
    unchanged: list[Path] = []
    removed: list[Path] = []
    absent: list[Path] = []
    ran: list[StepResult] = []
    failed: StepResult | None = None
    next_steps: list[Step] = []
    tool_missing: str | None = None


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


def changed(file: PlannedFile) -> bool:
    """Whether writing ``file`` would change what is on disk."""
    return read_text(file.path) != file.text


def write_changed(
    files: list[PlannedFile], make_dir: Callable[[Path], None] = ensure_dir
) -> tuple[list[Path], list[Path]]:
    """Write the files whose text changed, making their folders with ``make_dir`` (private by
    default; a service manager's folder is made as the manager expects); the written and the unchanged.
    """
    written: list[Path] = []
    unchanged: list[Path] = []
    for file in files:
        if changed(file):
            make_dir(file.path.parent)
            write_file(file.path, file.text, file.mode)
            written.append(file.path)
        else:
            unchanged.append(file.path)
    return written, unchanged


def would_do(plan: Plan) -> list[str]:
    """The plan as lines, in the order it would be carried out (it reads the files, changes nothing)."""
    lines = [f"would run: {step.shell()}" for step in plan.before]
    lines += [f"would write {f.path}" + ("" if changed(f) else " (unchanged)") for f in plan.write]
    lines += [f"would remove {p}" + ("" if p.exists() else " (not installed)") for p in plan.remove]
    lines += [f"would run: {step.shell()}" for step in plan.after]
    return lines


def did(outcome: Outcome) -> list[str]:
    """The outcome as lines: files written or left, commands run (with a failure's exit code), removals."""
    lines = [f"wrote: {path}" for path in outcome.written]
    lines += [f"unchanged: {path}" for path in outcome.unchanged]
    for result in outcome.ran:
        said = result.note or (f"exit {result.returncode}" if result.returncode else "")
        lines.append(f"ran: {result.step.shell()}" + (f" ({said})" if said else ""))
    lines += [f"removed: {path}" for path in outcome.removed]
    lines += [f"not installed: {path}" for path in outcome.absent]
    return lines


def steps_lines(title: str, steps: list[Step]) -> list[str]:
    """Steps left for the person, under ``title``, one command a line (nothing when there are none)."""
    return [title, *(f"  {step.shell()}" for step in steps)] if steps else []
