"""``pbot-watch service install|uninstall|status`` against temporary HOME/XDG folders.

The real ``pbot-watch`` runs as a subprocess. The service managers are stood in for by small
executables first on ``PATH`` that record their arguments (an external program, so faking it
mocks none of our code); the real ``systemctl`` of the machine is never reachable from these
tests, so they cannot touch the person's own user manager.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pbot_watch.service import install as svc
from tests.support.cli import invoke

SCRIPT = Path(sys.executable).parent / "pbot-watch"

FAKE_TOOL = textwrap.dedent(
    """\
    #!/bin/sh
    # Records its arguments; fails when the subcommand is listed in FAKE_FAIL.
    echo "$*" >> "$FAKE_LOG"
    for word in $FAKE_FAIL; do
        if [ "$word" = "$2" ] || [ "$word" = "$1" ]; then
            echo "Failed to connect to bus: No medium found" >&2
            exit 1
        fi
    done
    case "$2" in
        is-active) echo active ;;
        is-enabled) echo enabled ;;
    esac
    case "$1" in
        print) echo "gui/501/dev.pbot-watch = {"; echo "	state = running"; echo "}" ;;
    esac
    exit 0
    """
)


class Env:
    """A temporary world: HOME, XDG folders, and a PATH holding only the tools a test puts there."""

    def __init__(self, home: Path, tmp: Path) -> None:
        self.home = home
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.log = tmp / "calls.log"
        self.fail = ""

    def add_tool(self, name: str) -> None:
        path = self.bin / name
        path.write_text(FAKE_TOOL)
        path.chmod(0o755)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``pbot-watch service ARGS`` in this process; the tools it calls are the fake ones on PATH."""
        env = {"PATH": str(self.bin), "FAKE_LOG": str(self.log), "FAKE_FAIL": self.fail}
        return invoke("service", *args, env=env)

    @property
    def unit(self) -> Path:
        return self.home / "config" / "systemd" / "user" / "pbot-watch.service"

    @property
    def plist(self) -> Path:
        return self.home / "Library" / "LaunchAgents" / "dev.pbot-watch.plist"


@pytest.fixture
def world(isolated_home: Path, tmp_path: Path) -> Env:
    return Env(isolated_home, tmp_path)


def unit_values(text: str) -> dict[str, list[str]]:
    """``Key=Value`` lines of a unit file, per key (keys may repeat)."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


class TestSystemdInstall:
    def test_writes_unit_and_enables_it(self, world: Env) -> None:
        """install writes the user unit, reloads systemd and enables the service with --now."""
        world.add_tool("systemctl")
        result = world.run("install", "--manager", "systemd")
        assert result.returncode == 0, result.stderr
        values = unit_values(world.unit.read_text())
        assert values["Type"] == ["exec"]
        assert values["Restart"] == ["on-failure"]
        assert values["EnvironmentFile"] == [f"-{world.home / 'config' / 'pbot-watch' / 'env'}"]
        assert values["ExecStart"] == [f"{SCRIPT} run"]
        assert values["WantedBy"] == ["default.target"]
        assert world.calls() == ["--user daemon-reload", "--user enable --now pbot-watch.service"]
        assert "installed and started" in result.stdout
        assert oct(world.unit.stat().st_mode & 0o777) == "0o644"

    def test_service_runs_at_background_priority(self, world: Env) -> None:
        """The unit runs the service niced, batch-scheduled, with idle-class disk I/O (a first run reads the whole history)."""
        result = world.run("install", "--manager", "systemd", "--print")
        assert result.returncode == 0, result.stderr
        values = unit_values(result.stdout)
        expected = (["10"], ["batch"], ["idle"])
        assert expected == (values["Nice"], values["CPUSchedulingPolicy"], values["IOSchedulingClass"])

    def test_exec_start_is_absolute_and_runs(self, world: Env) -> None:
        """ExecStart names an executable that exists and answers, with no PATH needed."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        argv = unit_values(world.unit.read_text())["ExecStart"][0].split()
        assert Path(argv[0]).is_absolute()
        assert argv[1:] == ["run"]
        check = subprocess.run(
            [argv[0], "run", "--help"], capture_output=True, text=True, env={}, check=False
        )
        assert check.returncode == 0, check.stderr
        assert "Watch Pi's session folders" in check.stdout

    def test_location_variables_are_passed_on(self, world: Env) -> None:
        """PI_CODING_AGENT_DIR and the XDG folders of the installing shell reach the service."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        environment = unit_values(world.unit.read_text())["Environment"]
        assert f'"PI_CODING_AGENT_DIR={world.home / ".pi" / "agent"}"' in environment
        assert f'"XDG_STATE_HOME={world.home / "state"}"' in environment
        assert "PYTHONUNBUFFERED=1" in environment

    def test_flags_go_into_the_command_line(self, world: Env, tmp_path: Path) -> None:
        """--sessions and --archive given to install become absolute arguments of ``run``; spaces are quoted."""
        world.add_tool("systemctl")
        archive = tmp_path / "my archive"
        result = world.run("install", "--sessions", str(tmp_path / "s"), "--archive", str(archive))
        assert result.returncode == 0, result.stderr
        (exec_start,) = unit_values(world.unit.read_text())["ExecStart"]
        assert exec_start == f'{SCRIPT} run --sessions {tmp_path / "s"} --archive "{archive}"'

    def test_env_file_option(self, world: Env, tmp_path: Path) -> None:
        """--env-file replaces the default env file."""
        world.add_tool("systemctl")
        assert world.run("install", "--env-file", str(tmp_path / "keys.env")).returncode == 0
        assert unit_values(world.unit.read_text())["EnvironmentFile"] == [f"-{tmp_path / 'keys.env'}"]

    def test_second_install_is_unchanged(self, world: Env) -> None:
        """Installing again with the same options rewrites nothing and restarts nothing."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        second = world.run("install")
        assert second.returncode == 0
        assert second.stdout.startswith("unchanged: ")
        assert "--user try-restart pbot-watch.service" not in world.calls()

    def test_changed_unit_restarts_a_running_service(self, world: Env, tmp_path: Path) -> None:
        """A changed unit is reloaded and a running service restarted, so the change takes effect."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        assert world.run("install", "--archive", str(tmp_path / "a")).returncode == 0
        assert world.calls()[-3:] == [
            "--user daemon-reload",
            "--user enable --now pbot-watch.service",
            "--user try-restart pbot-watch.service",
        ]

    def test_print_writes_nothing(self, world: Env) -> None:
        """--print shows the unit on stdout and the plan on stderr; no file, no command."""
        world.add_tool("systemctl")
        result = world.run("install", "--print")
        assert result.returncode == 0, result.stderr
        assert "Type=exec" in result.stdout
        assert f"# would write {world.unit}" in result.stderr
        assert "# would run: systemctl --user enable --now pbot-watch.service" in result.stderr
        assert not world.unit.exists()
        assert world.calls() == []

    def test_print_names_the_restart_a_changed_unit_needs(self, world: Env, tmp_path: Path) -> None:
        """--print says what install would do now: over an installed unit it would change, restart too."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        same = world.run("install", "--print")
        assert f"# would write {world.unit} (unchanged)" in same.stderr
        assert "try-restart" not in same.stderr
        changed = world.run("install", "--print", "--archive", str(tmp_path / "a"))
        assert f"# would write {world.unit}\n" in changed.stderr
        assert changed.stderr.rstrip().endswith(
            "# would run: systemctl --user try-restart pbot-watch.service"
        )

    def test_missing_systemctl_still_writes_the_unit(self, world: Env) -> None:
        """Without systemctl the unit is written and the next steps are printed; that is not a failure."""
        result = world.run("install", "--manager", "systemd")
        assert result.returncode == 0, result.stderr
        assert world.unit.exists()
        assert "systemctl not found" in result.stdout
        assert (
            "  systemctl --user daemon-reload\n  systemctl --user enable --now pbot-watch.service"
            in result.stdout
        )

    def test_failing_systemctl_is_reported_and_keeps_the_unit(self, world: Env) -> None:
        """When enabling fails (no user bus) the command fails with systemctl's message; the unit stays."""
        world.add_tool("systemctl")
        world.fail = "enable"
        result = world.run("install")
        assert result.returncode == 1
        assert world.unit.exists()
        assert result.stderr.startswith(
            "pbot-watch: `systemctl --user enable --now pbot-watch.service` failed"
        )
        assert "Failed to connect to bus" in result.stderr
        assert "Still to do, once the error is fixed:\n  systemctl --user enable --now" in result.stdout
        assert "Traceback" not in result.stderr

    def test_invalid_config_stops_install(self, world: Env) -> None:
        """A broken config file is reported before anything is written: the service would fail on it too."""
        world.add_tool("systemctl")
        config = world.home / "config" / "pbot-watch" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text("idle = 3\n")
        result = world.run("install")
        assert result.returncode == 2  # a bad setting, as from every command (tests/test_errors.py)
        assert "idle (" in result.stderr
        assert not world.unit.exists()


class TestSystemdUninstallAndStatus:
    def test_uninstall_stops_then_removes(self, world: Env) -> None:
        """uninstall disables and stops the service, removes the unit and reloads systemd."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        result = world.run("uninstall")
        assert result.returncode == 0, result.stderr
        assert not world.unit.exists()
        assert world.calls()[-2:] == ["--user disable --now pbot-watch.service", "--user daemon-reload"]
        assert f"removed: {world.unit}" in result.stdout

    def test_uninstall_when_not_installed(self, world: Env) -> None:
        """Uninstalling twice is harmless."""
        world.add_tool("systemctl")
        result = world.run("uninstall")
        assert result.returncode == 0, result.stderr
        assert "not installed" in result.stdout

    def test_uninstall_print_changes_nothing(self, world: Env) -> None:
        """uninstall --print names the file and commands but leaves them alone."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        before = world.calls()
        result = world.run("uninstall", "--print")
        assert result.returncode == 0
        assert f"would remove {world.unit}" in result.stdout
        assert world.unit.exists()
        assert world.calls() == before

    def test_uninstall_without_systemctl_removes_the_file(self, world: Env) -> None:
        """Without systemctl the file is removed and the stop command is printed."""
        assert world.run("install").returncode == 0
        result = world.run("uninstall")
        assert result.returncode == 0
        assert not world.unit.exists()
        assert "systemctl --user disable --now pbot-watch.service" in result.stdout

    def test_status_running(self, world: Env) -> None:
        """status reports the file as current and the manager's view; exit 0 when active."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        result = world.run("status", "--json")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["installed"] is True
        assert doc["current"] is True
        assert doc["enabled"] == "enabled"
        assert doc["active"] == "active"
        assert doc["running"] is True
        assert doc["path"] == str(world.unit)

    def test_status_stale_unit(self, world: Env, tmp_path: Path) -> None:
        """A unit written with other options is shown as differing from a fresh install."""
        world.add_tool("systemctl")
        assert world.run("install", "--archive", str(tmp_path / "a")).returncode == 0
        assert "differs from what" in world.run("status").stdout
        assert "(current)" in world.run("status", "--archive", str(tmp_path / "a")).stdout

    def test_status_not_installed(self, world: Env) -> None:
        """Without systemctl and without a unit, status says so and exits 3."""
        result = world.run("status")
        assert result.returncode == 3
        assert "not installed" in result.stdout
        assert "unknown (systemctl not found)" in result.stdout

    def test_status_print_shows_installed_file(self, world: Env) -> None:
        """status --print shows the unit as installed."""
        world.add_tool("systemctl")
        assert world.run("install").returncode == 0
        assert world.run("status", "--print").stdout == world.unit.read_text()


class TestLaunchd:
    def test_agent_runs_at_background_priority(self, world: Env) -> None:
        """The agent is a background process, niced, with low-priority disk I/O."""
        result = world.run("install", "--manager", "launchd", "--print")
        assert result.returncode == 0, result.stderr
        agent = plistlib.loads(result.stdout.encode())
        assert ("Background", 10, True) == (agent["ProcessType"], agent["Nice"], agent["LowPriorityIO"])

    def test_install_writes_a_valid_plist_and_bootstraps(self, world: Env) -> None:
        """The agent plist is valid, runs pbot-watch with an absolute path, and is bootstrapped in gui/$UID."""
        world.add_tool("launchctl")
        result = world.run("install", "--manager", "launchd")
        assert result.returncode == 0, result.stderr
        agent = plistlib.loads(world.plist.read_bytes())
        assert agent["Label"] == "dev.pbot-watch"
        assert agent["ProgramArguments"] == [str(SCRIPT), "run"]
        assert agent["RunAtLoad"] is True
        assert agent["KeepAlive"] == {"SuccessfulExit": False}
        assert agent["EnvironmentVariables"]["PI_CODING_AGENT_DIR"] == str(world.home / ".pi" / "agent")
        log_file = Path(agent["StandardOutPath"])
        assert log_file.parent.is_dir()
        uid = os.getuid()
        assert world.calls() == [
            f"bootout gui/{uid}/dev.pbot-watch",
            f"enable gui/{uid}/dev.pbot-watch",
            f"bootstrap gui/{uid} {world.plist}",
        ]

    def test_bootout_failure_is_not_fatal(self, world: Env) -> None:
        """Unloading an agent that is not loaded fails; the install goes on."""
        world.add_tool("launchctl")
        world.fail = "bootout"
        result = world.run("install", "--manager", "launchd")
        assert result.returncode == 0, result.stderr
        assert world.calls()[-1].startswith("bootstrap ")

    def test_env_file_is_passed_as_a_variable(self, world: Env, tmp_path: Path) -> None:
        """launchd has no EnvironmentFile: an explicit env file reaches the service as PBOT_WATCH_ENV_FILE."""
        result = world.run("install", "--manager", "launchd", "--env-file", str(tmp_path / "k & v.env"))
        assert result.returncode == 0, result.stderr
        agent = plistlib.loads(world.plist.read_bytes())
        assert agent["EnvironmentVariables"]["PBOT_WATCH_ENV_FILE"] == str(tmp_path / "k & v.env")

    def test_missing_launchctl(self, world: Env) -> None:
        """Without launchctl the plist is written and the bootstrap command printed."""
        result = world.run("install", "--manager", "launchd")
        assert result.returncode == 0, result.stderr
        assert world.plist.exists()
        assert f"launchctl bootstrap gui/{os.getuid()} {world.plist}" in result.stdout

    def test_status_and_uninstall(self, world: Env) -> None:
        """status reads launchctl print's state; uninstall boots the agent out and removes the plist."""
        world.add_tool("launchctl")
        assert world.run("install", "--manager", "launchd").returncode == 0
        status = world.run("status", "--manager", "launchd", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["active"] == "running"
        assert world.run("uninstall", "--manager", "launchd").returncode == 0
        assert not world.plist.exists()
        assert world.calls()[-1] == f"bootout gui/{os.getuid()}/dev.pbot-watch"


class TestRendering:
    def test_systemd_quoting(self) -> None:
        """Specifiers and variables are doubled; words with spaces or quotes are quoted."""
        assert svc.systemd_quote("/opt/venv/bin/pbot-watch") == "/opt/venv/bin/pbot-watch"
        assert svc.systemd_quote("/a b/50%$x") == '"/a b/50%%$$x"'
        assert svc.systemd_quote('say "hi"\\') == '"say \\"hi\\"\\\\"'

    def test_control_characters_are_refused(self) -> None:
        """A newline in a path would inject unit lines; it is refused with a message."""
        with pytest.raises(svc.ServiceError, match="control character"):
            svc.render_systemd(["/bin/x", "a\nExecStartPre=/bin/evil"], Path("/k"), {})

    def test_python_fallback_without_console_script(self, tmp_path: Path) -> None:
        """Without a pbot-watch script beside the interpreter the service runs ``python -P -m pbot_watch``."""
        python = tmp_path / "bin" / "python3"
        assert svc.service_command(["--archive", "/a"], str(python)) == [
            str(python), "-P", "-m", "pbot_watch", "run", "--archive", "/a",
        ]  # fmt: skip

    def test_python_fallback_command_works(self) -> None:
        """``python -P -m pbot_watch run --help`` answers from any folder (what the fallback runs)."""
        done = subprocess.run(
            [sys.executable, "-P", "-m", "pbot_watch", "run", "--help"],
            capture_output=True, text=True, check=False, cwd="/", timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Usage: pbot-watch run" in done.stdout

    def test_templates_come_from_the_package(self) -> None:
        """The templates are package data (pbot_watch/templates), identical to systemd/ in the repository."""
        repo = Path(__file__).resolve().parents[2]
        for name in ("pbot-watch.service", "pbot-watch.plist"):
            assert svc.template_text(name) == (repo / "systemd" / name).read_text(encoding="utf-8")

    @pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
    def test_systemd_accepts_the_unit(self, tmp_path: Path) -> None:
        """``systemd-analyze verify`` finds nothing to complain about in the rendered unit."""
        service = svc.render("systemd", ["--archive", str(tmp_path / "a b")], tmp_path / "k%.env")
        unit = tmp_path / "pbot-watch.service"
        unit.write_text(service.content)
        done = subprocess.run(
            ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False, timeout=60
        )
        complaints = [line for line in (done.stdout + done.stderr).splitlines() if str(unit) in line]
        assert complaints == []


class TestPackaging:
    def test_templates_ship_in_the_built_package(self, tmp_path: Path) -> None:
        """setuptools' build_py (what a wheel is made of) turns the templates symlink into real files, and ships the Pi package."""
        repo = Path(__file__).resolve().parents[2]
        source = tmp_path / "src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md"):
            if (repo / name).exists():
                shutil.copy(repo / name, source / name)
        for folder in ("pbot_watch", "systemd", "prompts"):
            if (repo / folder).exists():
                shutil.copytree(
                    repo / folder,
                    source / folder,
                    symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"),
                )
        build = tmp_path / "build"
        done = subprocess.run(
            [sys.executable, "-c", "import setuptools; setuptools.setup()", "build_py", "--build-lib", str(build)],
            cwd=source, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        shipped = build / "pbot_watch" / "templates"
        assert not shipped.is_symlink()
        for name in ("pbot-watch.service", "pbot-watch.plist"):
            assert (shipped / name).is_file()
            assert (shipped / name).read_text() == (repo / "systemd" / name).read_text()
        assert (build / "pbot_watch" / "__main__.py").is_file()
        for name in ("package.json", "extension.ts"):  # the Pi package `pbot-watch pi install` copies
            assert (build / "pbot_watch" / "pi_package" / name).read_bytes() == (
                repo / "pbot_watch" / "pi_package" / name
            ).read_bytes()
