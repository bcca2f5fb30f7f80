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
virtualenv, while Pi's settings keep the path they were given. Rendering is pure
(:func:`plan_install`), so ``--print`` shows exactly what would be written and run.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pbot_watch import __version__
from pbot_watch.archive.atomic import ensure_dir
from pbot_watch.config_paths import APP, xdg_dir
from pbot_watch.errors import PbotWatchError
from pbot_watch.installer import read_text, run_command, write_file
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


class PiPlan(BaseModel):
    """Everything an install or uninstall would do: the files and the ``pi`` command."""

    model_config = ConfigDict(frozen=True)

    folder: Path
    files: dict[str, str]
    argv: list[str]
    local: bool


class PiOutcome(BaseModel):
    plan: PiPlan
    written: list[str] = []
    unchanged: list[str] = []
    returncode: int = 0
    output: str = ""
    removed_folder: bool = False
    was_installed: bool = True

    @property
    def failed(self) -> bool:
        return self.returncode != 0 and self.was_installed


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
) -> PiPlan:
    folder = package_folder()
    config = bridge_config(list(serve_args or []), executable)
    files = {**shipped_files(), CONFIG_NAME: config.model_dump_json(indent=2) + "\n"}
    return PiPlan(folder=folder, files=files, argv=[pi, "install", str(folder), *_scope(local)], local=local)


def plan_uninstall(pi: str, *, local: bool) -> PiPlan:
    folder = package_folder()
    # Pi asks for project trust before it edits a project's settings on removal (not on
    # install); the person asked for exactly this edit, so this one run is trusted.
    scope = ["-l", "--approve"] if local else []
    return PiPlan(folder=folder, files={}, argv=[pi, "remove", str(folder), *scope], local=local)


def _scope(local: bool) -> list[str]:
    return ["-l"] if local else []


def changes(plan: PiPlan) -> dict[str, bool]:
    """For each file of the plan, whether writing it would change the folder."""
    return {name: read_text(plan.folder / name) != text for name, text in plan.files.items()}


def install(plan: PiPlan, cwd: Path | None = None) -> PiOutcome:
    """Write the files that changed, then register the folder with ``pi install``."""
    ensure_dir(plan.folder)
    for name in STALE_FILES:
        (plan.folder / name).unlink(missing_ok=True)
    written, unchanged = [], []
    for name, changed in changes(plan).items():
        if changed:
            ensure_dir((plan.folder / name).parent)
            write_file(plan.folder / name, plan.files[name], FILE_MODE)
            written.append(name)
        else:
            unchanged.append(name)
    code, output = _run(plan.argv, cwd)
    return PiOutcome(plan=plan, written=written, unchanged=unchanged, returncode=code, output=output)


def uninstall(plan: PiPlan, cwd: Path | None = None) -> PiOutcome:
    """``pi remove`` the folder; at user level, then delete the folder too.

    A project install (``--local``) leaves the folder, which the user-level install and other
    projects may still use.
    """
    code, output = _run(plan.argv, cwd)
    was_installed = not (code != 0 and _NOT_INSTALLED in output)
    removed = False
    if not plan.local and (code == 0 or not was_installed) and plan.folder.is_dir():
        shutil.rmtree(plan.folder)
        removed = True
    return PiOutcome(
        plan=plan, returncode=code, output=output, removed_folder=removed, was_installed=was_installed
    )


def _run(argv: list[str], cwd: Path | None) -> tuple[int, str]:
    done = run_command(argv, timeout=PI_TIMEOUT_S, cwd=cwd)
    return done.returncode, done.output
