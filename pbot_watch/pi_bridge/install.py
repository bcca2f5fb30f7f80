"""``pbot-watch pi install|uninstall``: the Pi package, installed with Pi's own ``pi install``.

The package ships in the wheel (``pbot_watch/pi_package``). Installing copies it to one
per-user folder, ``$XDG_DATA_HOME/pbot-watch/pi-package`` (the extension as ``pbot-watch/index.ts``),
writes ``pbot-watch.json`` beside the extension
(how to start this very pbot-watch, the tools' names, descriptions and schemas, and the page
sizes ``/history`` asks for, all from the tools' argument models), then runs
``pi install <folder>`` (``-l``: the project's ``.pi/settings.json``). Pi loads a local package
from where it lies, so re-running ``pbot-watch pi install`` after upgrading pbot-watch rewrites
the files in place and every Pi started afterwards (or ``/reload``) runs the new extension:
that is the one command to update it.

Why a copy and not the wheel's own folder: a wheel's files move with every upgrade and
virtualenv, while Pi's settings keep the path they were given. Planning touches nothing
(:func:`plan_install`, :func:`plan_uninstall`: the installers' one :class:`Plan`), so
``--print`` shows exactly what would be written, removed and run.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

from pbot_watch import __version__
from pbot_watch.config_paths import APP, xdg_dir
from pbot_watch.errors import PbotWatchError
from pbot_watch.installer import Outcome, Plan, PlannedFile, Step, StepResult, run_command, write_changed
from pbot_watch.launcher import pbot_watch_command
from pbot_watch.pi_bridge.protocol import BridgeConfig, Pages, ToolDefinition

PACKAGE_FILES = ("package.json", "extension.ts")
# Where each shipped file goes in the installed package. Pi names a local package's extension in
# its start-up list by the shortest unique end of its path, an ``index.ts`` by its folder: so
# the extension is ``pbot-watch/index.ts`` and the list says "pbot-watch", not "extension.ts".
EXTENSION_DIR = "pbot-watch"
INSTALLED_NAMES = {"package.json": "package.json", "extension.ts": f"{EXTENSION_DIR}/index.ts"}
CONFIG_NAME = f"{EXTENSION_DIR}/pbot-watch.json"  # read from beside the extension
# What older versions installed at the package's top: removed by an install.
STALE_FILES = ("extension.ts", "pbot-watch.json")
FILE_MODE = 0o644  # Pi reads these; they hold no secrets
PI_TIMEOUT_S = 120.0
# What `pi remove` says when the source was not in the settings (it exits 1 then).
_NOT_INSTALLED = "No matching package"


class PiNotFound(PbotWatchError):
    """The ``pi`` command cannot be found; the message says where we looked and what to do."""


def package_folder() -> Path:
    """Where the installed package lives: one folder per user, whatever the virtualenv."""
    return xdg_dir("XDG_DATA_HOME", ".local/share") / APP / "pi-package"


def find_pi(explicit: str | None = None) -> str:
    """The ``pi`` executable: ``explicit`` (a path or a name on PATH), else ``pi`` on PATH."""
    if explicit is not None:
        found = shutil.which(explicit)
        if found is None:
            raise PiNotFound(f"--pi {explicit}: not an executable file")
        return os.path.abspath(found)
    found = shutil.which("pi")
    if found is None:
        raise PiNotFound(
            "pi (the Pi coding agent) is not on PATH: install it "
            "(npm install -g @earendil-works/pi-coding-agent) or pass --pi PATH"
        )
    return found


def shipped_files() -> dict[str, str]:
    """The package files as the wheel ships them, by their names in the installed package."""
    folder = resources.files("pbot_watch").joinpath("pi_package")
    return {
        INSTALLED_NAMES[name]: folder.joinpath(name).read_text(encoding="utf-8") for name in PACKAGE_FILES
    }


def tool_definitions() -> list[ToolDefinition]:
    """The native tools: the registry's names, descriptions and argument schemas (as over MCP)."""
    from pbot_watch.tools.registry import TOOLS  # noqa: PLC0415 - only install needs the schemas

    return [
        ToolDefinition(
            name=tool.name, label=tool.title, description=tool.description, parameters=tool.input_schema()
        )
        for tool in TOOLS
    ]


def tool_pages() -> Pages:
    """The page sizes ``/history`` asks for: the history tools' default limits, as their models declare them."""
    from pbot_watch.tools.arguments import HistoryReadArgs, HistorySearchArgs  # noqa: PLC0415

    return Pages(
        historySearch=HistorySearchArgs.model_fields["limit"].get_default(),
        historyRead=HistoryReadArgs.model_fields["limit"].get_default(),
    )


def bridge_config(serve_args: list[str], executable: str | None = None) -> BridgeConfig:
    return BridgeConfig(
        version=__version__,
        command=pbot_watch_command(["pi", "serve", *serve_args], executable),
        tools=tool_definitions(),
        pages=tool_pages(),
    )


def plan_install(
    pi: str, *, local: bool, serve_args: list[str] | None = None, executable: str | None = None
) -> Plan:
    """The package's files (with ``pbot-watch.json`` for this pbot-watch), what an older version
    left at the package's top removed, then ``pi install`` of the folder.
    """
    folder = package_folder()
    config = bridge_config(list(serve_args or []), executable)
    files = {**shipped_files(), CONFIG_NAME: config.model_dump_json(indent=2) + "\n"}
    return Plan(
        write=[PlannedFile(path=folder / name, text=text, mode=FILE_MODE) for name, text in files.items()],
        remove=[folder / name for name in STALE_FILES if (folder / name).exists()],
        after=[Step(argv=[pi, "install", str(folder), *_scope(local)], why="register the folder with Pi")],
    )


def plan_uninstall(pi: str, *, local: bool) -> Plan:
    """``pi remove`` the folder; at user level the folder goes too (other projects may use it with -l)."""
    folder = package_folder()
    # Pi asks for project trust before it edits a project's settings on removal (not on
    # install); the person asked for exactly this edit, so this one run is trusted.
    scope = ["-l", "--approve"] if local else []
    remove = Step(argv=[pi, "remove", str(folder), *scope], why="drop the folder from Pi's settings")
    return Plan(before=[remove], remove=[] if local else [folder])


def _scope(local: bool) -> list[str]:
    return ["-l"] if local else []


def install(plan: Plan, cwd: Path | None = None) -> Outcome:
    """Write the files that changed, then register the folder with ``pi install``."""
    for path in plan.remove:
        path.unlink(missing_ok=True)
    written, unchanged = write_changed(plan.write)
    (step,) = plan.after
    result = _run(step, cwd)
    return Outcome(
        plan=plan,
        written=written,
        unchanged=unchanged,
        ran=[result],
        failed=result if result.returncode != 0 else None,
    )


def uninstall(plan: Plan, cwd: Path | None = None) -> Outcome:
    """``pi remove`` the folder; at user level, then delete the folder too.

    A project install (``--local``) leaves the folder, which the user-level install and other
    projects may still use. ``pi remove`` of a package Pi does not have fails; that is no
    failure here: it is what uninstalling twice does.
    """
    (step,) = plan.before
    result = _run(step, cwd)
    was_installed = not (result.returncode != 0 and _NOT_INSTALLED in result.output)
    if not was_installed:
        result = result.model_copy(update={"note": "it was not installed"})
    removed, absent = [], []
    for folder in plan.remove:
        if not folder.is_dir():
            absent.append(folder)
        elif result.returncode == 0 or not was_installed:
            shutil.rmtree(folder)
            removed.append(folder)
    failed = result if result.returncode != 0 and was_installed else None
    return Outcome(plan=plan, ran=[result], failed=failed, removed=removed, absent=absent)


def _run(step: Step, cwd: Path | None) -> StepResult:
    done = run_command(step.argv, timeout=PI_TIMEOUT_S, cwd=cwd)
    return StepResult(step=step, returncode=done.returncode, output=done.output)
