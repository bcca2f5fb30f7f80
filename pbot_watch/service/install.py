"""``pbot-watch service install|uninstall|status``: a systemd user unit or a launchd agent.

The files come from the templates in the repository's ``systemd/`` folder, which ships inside
the package as ``pbot_watch/templates`` (a symlink in the source tree, real files in the wheel).
Rendering is pure: a :class:`ServiceUnit` holds the file's path and text and the commands
around it, and ``install_plan``/``uninstall_plan`` make the installers' one :class:`Plan` of
it, so ``--print`` shows exactly what ``install`` would do and tests can check the text
without a service manager.

The service must run the same pbot-watch that installed it, from any working directory and
without the shell's ``PATH``, so ``ExecStart`` is absolute: the ``pbot-watch`` script beside
the current interpreter when there is one (a venv, pipx, uv tool), else
``<python> -P -m pbot_watch`` (``-P``: the service's working directory must not shadow the
package). The few variables that decide where pbot-watch reads and writes
(``PI_CODING_AGENT_DIR``, ``PBOT_WATCH_CONFIG``, ``XDG_CONFIG_HOME``, ``XDG_STATE_HOME``) are
copied into the unit when they are set, because a service manager's environment is not the
shell's and ``pbot-watch status`` must find the state the service writes.

Where ``systemctl``/``launchctl`` is missing (containers, CI) the file is still written and
the commands are returned as next steps; where a command fails, the file stays and the error
is reported with the steps left to do.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Literal
from xml.sax.saxutils import escape as xml_escape

from pydantic import BaseModel, ConfigDict

from pbot_watch import __version__
from pbot_watch.config_paths import APP, default_env_file, xdg_dir
from pbot_watch.errors import PbotWatchError
from pbot_watch.installer import (
    Outcome,
    Plan,
    PlannedFile,
    Step,
    StepResult,
    read_text,
    run_command,
    run_steps,
    write_changed,
)
from pbot_watch.launcher import pbot_watch_command

Manager = Literal["systemd", "launchd"]

UNIT_NAME = "pbot-watch.service"
LAUNCHD_LABEL = "dev.pbot-watch"
SERVICE_FILE_MODE = 0o644  # service managers read these; they hold no secrets (keys live in the env file)
COMMAND_TIMEOUT = 60.0

# Variables that decide where pbot-watch finds sessions, config and state.
PASSED_ENV = ("PI_CODING_AGENT_DIR", "PBOT_WATCH_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME")

_PLACEHOLDER = re.compile(r"@[A-Z_]+@")
# Characters that need no quoting in a systemd command line.
_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9_./:=@+,-]+")


class ServiceError(PbotWatchError):
    """A service operation that cannot go on; the message says what to do."""


class ServiceUnit(BaseModel):
    """The rendered service: the file, its text, and the commands that install, restart and remove it."""

    model_config = ConfigDict(frozen=True)

    manager: Manager
    path: Path
    content: str
    command: list[str]
    env_file: Path | None
    install_steps: list[Step]
    restart_steps: list[Step]
    uninstall_steps: list[Step]
    log_file: Path | None = None
    hints: list[str] = []


class ServiceStatus(BaseModel):
    """The installed file and what the service manager says about it."""

    manager: Manager
    path: Path
    installed: bool
    current: bool
    tool: str
    tool_available: bool
    enabled: str | None = None
    active: str | None = None
    detail: str | None = None

    @property
    def running(self) -> bool:
        return self.active in {"active", "running"}


def default_manager() -> Manager:
    return "launchd" if sys.platform == "darwin" else "systemd"


def service_path(manager: Manager) -> Path:
    """``$XDG_CONFIG_HOME/systemd/user/pbot-watch.service`` or ``~/Library/LaunchAgents/<label>.plist``."""
    if manager == "systemd":
        return xdg_dir("XDG_CONFIG_HOME", ".config") / "systemd" / "user" / UNIT_NAME
    return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def launchd_log_file() -> Path:
    return Path.home() / "Library" / "Logs" / APP / f"{APP}.log"


def service_command(run_args: list[str], executable: str | None = None) -> list[str]:
    """The absolute command line of the service: ``pbot-watch run ...``."""
    return pbot_watch_command(["run", *run_args], executable)


def template_text(name: str) -> str:
    """A template from ``systemd/`` as shipped in the package."""
    return resources.files("pbot_watch").joinpath("templates", name).read_text(encoding="utf-8")


def _fill(template: str, values: Mapping[str, str]) -> str:
    text = template
    for key, value in values.items():
        # A whole-line placeholder with an empty value takes its line with it.
        if not value:
            text = re.sub(rf"^[ \t]*@{key}@\n", "", text, flags=re.MULTILINE)
        text = text.replace(f"@{key}@", value)
    left = _PLACEHOLDER.findall(text)
    if left:
        raise ServiceError(f"template placeholders left unfilled: {', '.join(sorted(set(left)))}")
    return text


def _check_value(value: str) -> str:
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):  # ASCII control range
        raise ServiceError(f"cannot put {value!r} in a service file: it holds a control character")
    return value


def systemd_quote(arg: str) -> str:
    """One ExecStart word: ``%`` and ``$`` doubled (specifiers, variables), quoted if needed."""
    _check_value(arg)
    text = arg.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_PLAIN.fullmatch(arg):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _systemd_environment(key: str, value: str) -> str:
    text = f"{key}={_check_value(value)}".replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"')
    return f'Environment="{text}"'


def passed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The location variables that are set now, made absolute, in a fixed order."""
    source = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key in PASSED_ENV:
        value = source.get(key)
        if value:
            out[key] = os.path.abspath(os.path.expanduser(value))
    return out


def render_systemd(command: list[str], env_file: Path, environment: Mapping[str, str]) -> str:
    return _fill(
        template_text("pbot-watch.service"),
        {
            "VERSION": __version__,
            "EXEC_START": " ".join(systemd_quote(arg) for arg in command),
            "ENV_FILE": _check_value(str(env_file)).replace("%", "%%"),
            "ENVIRONMENT": "\n".join(_systemd_environment(k, v) for k, v in environment.items()),
        },
    )


def render_launchd(command: list[str], environment: Mapping[str, str], log_file: Path) -> str:
    def string(value: str) -> str:
        return f"<string>{xml_escape(_check_value(value))}</string>"

    return _fill(
        template_text("pbot-watch.plist"),
        {
            "VERSION": __version__,
            "LABEL": LAUNCHD_LABEL,
            "PROGRAM_ARGUMENTS": "\n".join(f"    {string(arg)}" for arg in command),
            "ENVIRONMENT": "\n".join(
                f"    <key>{xml_escape(_check_value(k))}</key>\n    {string(v)}"
                for k, v in environment.items()
            ),
            "LOG_FILE": xml_escape(_check_value(str(log_file))),
        },
    )


def render(
    manager: Manager,
    run_args: list[str] | None = None,
    env_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    executable: str | None = None,
) -> ServiceUnit:
    """Render the service file and list the commands; touches nothing.

    ``env_file`` is the file of API keys; for systemd it defaults to
    ``$XDG_CONFIG_HOME/pbot-watch/env`` and is optional (``EnvironmentFile=-``). launchd has no
    such key: an explicit one is passed as ``PBOT_WATCH_ENV_FILE`` and the service reads it.
    """
    command = service_command(list(run_args or []), executable)
    environment = passed_environment(environ)
    path = service_path(manager)
    if manager == "systemd":
        keys = env_file or default_env_file()
        ctl = ["systemctl", "--user"]
        return ServiceUnit(
            manager=manager,
            path=path,
            content=render_systemd(command, keys, environment),
            command=command,
            env_file=keys,
            install_steps=[
                Step(argv=[*ctl, "daemon-reload"], why="make systemd read the new unit"),
                Step(argv=[*ctl, "enable", "--now", UNIT_NAME], why="start it now and at every login"),
            ],
            restart_steps=[
                Step(argv=[*ctl, "try-restart", UNIT_NAME], why="a running service picks up the change")
            ],
            uninstall_steps=[
                Step(
                    argv=[*ctl, "disable", "--now", UNIT_NAME],
                    required=False,
                    why="stop it and drop it from login",
                ),
                Step(argv=[*ctl, "daemon-reload"], required=False, why="forget the removed unit"),
            ],
            hints=[
                "logs: journalctl --user -u pbot-watch -f",
                "to keep it running while you are logged out: loginctl enable-linger",
                f"API keys (KEY=VALUE lines) go in {keys}",
            ],
        )
    if env_file is not None:
        environment = {**environment, "PBOT_WATCH_ENV_FILE": os.path.abspath(env_file)}
    domain = f"gui/{os.getuid()}"
    log_file = launchd_log_file()
    return ServiceUnit(
        manager=manager,
        path=path,
        content=render_launchd(command, environment, log_file),
        command=command,
        env_file=env_file,
        log_file=log_file,
        install_steps=[
            # A loaded agent keeps its old definition: unload it first (fails harmlessly when not loaded).
            Step(
                argv=["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"],
                required=False,
                why="unload an old copy",
            ),
            Step(argv=["launchctl", "enable", f"{domain}/{LAUNCHD_LABEL}"], why="allow it to load"),
            Step(argv=["launchctl", "bootstrap", domain, str(path)], why="load and start it"),
        ],
        restart_steps=[],
        uninstall_steps=[
            Step(
                argv=["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"],
                required=False,
                why="stop and unload it",
            ),
        ],
        hints=[
            f"logs: tail -f {log_file}",
            f"API keys (KEY=VALUE lines) go in {env_file or default_env_file()}",
        ],
    )


def _run_steps(steps: list[Step]) -> tuple[list[StepResult], StepResult | None, list[Step]]:
    return run_steps(steps, timeout=COMMAND_TIMEOUT)


def install_plan(unit: ServiceUnit) -> Plan:
    """Write the file, then activate it; a running service is restarted when its file changes."""
    file = PlannedFile(path=unit.path, text=unit.content, mode=SERVICE_FILE_MODE)
    previous = read_text(unit.path)
    restart = unit.restart_steps if previous is not None and previous != unit.content else []
    return Plan(write=[file], after=[*unit.install_steps, *restart], hints=unit.hints)


def uninstall_plan(unit: ServiceUnit) -> Plan:
    """Stop and disable it, remove the file, then let the manager forget it: nothing is orphaned."""
    stop, forget = unit.uninstall_steps[:1], unit.uninstall_steps[1:]
    return Plan(before=stop, remove=[unit.path], after=forget)


def _make_dir(folder: Path) -> None:
    # The service manager's own folder (~/.config/systemd/user): made as the manager makes it.
    folder.mkdir(parents=True, exist_ok=True)


def install(unit: ServiceUnit) -> Outcome:
    """Write the file (only if its text changed), then activate it with the service manager."""
    plan = install_plan(unit)
    tool = unit.install_steps[0].argv[0]
    written, unchanged = write_changed(plan.write, _make_dir)
    if unit.log_file is not None:
        unit.log_file.parent.mkdir(parents=True, exist_ok=True)
    done = Outcome(plan=plan, written=written, unchanged=unchanged)
    if shutil.which(tool) is None:
        return done.model_copy(update={"next_steps": plan.after, "tool_missing": tool})
    ran, failed, left = _run_steps(plan.after)
    return done.model_copy(update={"ran": ran, "failed": failed, "next_steps": left})


def uninstall(unit: ServiceUnit) -> Outcome:
    """Stop and disable the service, then remove its file; stopping comes first so nothing is orphaned."""
    plan = uninstall_plan(unit)
    tool = unit.uninstall_steps[0].argv[0]
    existed = unit.path.exists()
    gone = Outcome(plan=plan, removed=[unit.path] if existed else [], absent=[] if existed else [unit.path])
    if shutil.which(tool) is None:
        unit.path.unlink(missing_ok=True)
        return gone.model_copy(update={"next_steps": plan.steps, "tool_missing": tool})
    ran, failed, left = _run_steps(plan.before)
    unit.path.unlink(missing_ok=True)
    more, failed_after, left_after = _run_steps(plan.after)
    return gone.model_copy(
        update={"ran": ran + more, "failed": failed or failed_after, "next_steps": left + left_after}
    )


def status(service: ServiceUnit) -> ServiceStatus:
    """Is the file there, is it what ``install`` would write now, and what does the manager say."""
    text = read_text(service.path)
    tool = service.install_steps[-1].argv[0]
    info = ServiceStatus(
        manager=service.manager,
        path=service.path,
        installed=text is not None,
        current=text == service.content,
        tool=tool,
        tool_available=shutil.which(tool) is not None,
    )
    if not info.tool_available:
        return info
    if service.manager == "systemd":
        enabled = _query(["systemctl", "--user", "is-enabled", UNIT_NAME])
        active = _query(["systemctl", "--user", "is-active", UNIT_NAME])
        return info.model_copy(update={"enabled": enabled[1], "active": active[1], "detail": None})
    code, out = _query(["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"])
    if code != 0:
        return info.model_copy(update={"enabled": None, "active": "not loaded", "detail": out or None})
    state = re.search(r"^\s*state = (\S+)", out, flags=re.MULTILINE)
    return info.model_copy(update={"enabled": "loaded", "active": state.group(1) if state else "loaded"})


def _query(argv: list[str]) -> tuple[int, str]:
    done = run_command(argv, timeout=COMMAND_TIMEOUT)
    return done.returncode, (done.stdout.strip() or done.stderr.strip())
