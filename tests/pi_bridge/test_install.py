"""``pbot-watch pi install|uninstall``: the package lands in one folder and Pi's own settings name it.

The real ``pbot-watch`` runs as a subprocess, and the real Pi CLI (the cached 1.6 install of
the end-to-end tests) edits a temporary ``PI_CODING_AGENT_DIR``; nothing touches the person's
own Pi settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pbot_watch import __version__
from pbot_watch.pi_bridge.install import CONFIG_NAME, INSTALLED_NAMES, PACKAGE_FILES
from pbot_watch.pi_bridge.protocol import BridgeConfig
from tests.e2e.pi_install import PiInstall
from tests.support.cli import invoke
from tests.support.paths import REPO

SCRIPT = Path(sys.executable).parent / "pbot-watch"
PACKAGE_SOURCE = REPO / "pbot_watch" / "pi_package"


class World:
    """pbot-watch and Pi, with HOME, XDG folders and Pi's agent folder all temporary."""

    def __init__(self, home: Path, tmp: Path, path: str) -> None:
        self.home = home
        self.project = tmp / "project"
        self.project.mkdir()
        self.agent = Path(os.environ["PI_CODING_AGENT_DIR"])
        self.variables = {"PATH": path, "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"}
        self.env = {**os.environ, **self.variables}

    @property
    def folder(self) -> Path:
        return self.home / "data" / "pbot-watch" / "pi-package"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), "pi", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    def invoke(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``pbot-watch pi ARGS`` in this process, for what starts no Pi (--print, a missing pi)."""
        with contextlib.chdir(self.project):
            return invoke("pi", *args, env=self.variables)

    def user_packages(self) -> list[str]:
        return _packages(self.agent / "settings.json")

    def project_packages(self) -> list[str]:
        return _packages(self.project / ".pi" / "settings.json")


def _packages(settings: Path) -> list[str]:
    if not settings.exists():
        return []
    return list(json.loads(settings.read_text()).get("packages", []))


def resolved(settings_dir: Path, entries: list[str]) -> list[Path]:
    """Pi stores a local package relative to the settings file's folder."""
    return [(settings_dir / entry).resolve() for entry in entries]


@pytest.fixture
def real_pi(pi_install: PiInstall, isolated_home: Path, tmp_path: Path) -> World:
    """The real Pi CLI first on PATH (with the Node it needs)."""
    path = os.pathsep.join([str(pi_install.bin_dir), str(pi_install.node.parent), os.environ["PATH"]])
    return World(isolated_home, tmp_path, path)


@pytest.fixture
def no_pi(isolated_home: Path, tmp_path: Path) -> World:
    """A PATH with no ``pi`` on it."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return World(isolated_home, tmp_path, str(empty))


class TestPrint:
    def test_print_changes_nothing(self, real_pi: World) -> None:
        """--print lists the files and the `pi install` command, and writes neither files nor settings."""
        done = real_pi.invoke("install", "--print")
        assert done.returncode == 0, done.stderr
        for name in (*INSTALLED_NAMES.values(), CONFIG_NAME):
            assert f"would write {real_pi.folder / name}" in done.stdout
        assert (
            f"would run: {shutil.which('pi', path=real_pi.env['PATH'])} install {real_pi.folder}"
            in done.stdout
        )
        assert not real_pi.folder.exists()
        assert [] == real_pi.user_packages()

    def test_print_shows_the_config_that_starts_this_pbot_watch(self, real_pi: World, tmp_path: Path) -> None:
        """The config names this installation's script, `pi serve`, and the --archive given."""
        done = real_pi.invoke("install", "--print", "--archive", str(tmp_path / "archive"))
        config = BridgeConfig.model_validate_json(done.stdout.split(f"--- {CONFIG_NAME}\n", 1)[1])
        assert [str(SCRIPT), "pi", "serve", "--archive", str(tmp_path / "archive")] == config.command
        assert __version__ == config.version

    def test_pages_are_the_tools_defaults(self, real_pi: World) -> None:
        """The page sizes /history asks for are the history tools' default limits; the extension writes none."""
        done = real_pi.invoke("install", "--print")
        config = BridgeConfig.model_validate_json(done.stdout.split(f"--- {CONFIG_NAME}\n", 1)[1])
        limits = {t.name: t.parameters["properties"].get("limit", {}).get("default") for t in config.tools}
        assert (limits["history_search"], limits["history_read"]) == (
            config.pages.historySearch,
            config.pages.historyRead,
        )
        source = (PACKAGE_SOURCE / "extension.ts").read_text(encoding="utf-8")
        assert 2 == source.count("limit: bridge.config.pages.")
        assert re.search(r"\blimit:\s*[0-9A-Z_]", source) is None  # no number, no constant of its own

    def test_print_local_names_the_project_scope(self, real_pi: World) -> None:
        """--local adds Pi's -l."""
        done = real_pi.invoke("install", "--local", "--print")
        assert f"install {real_pi.folder} -l" in done.stdout

    @pytest.mark.slow
    def test_uninstall_print_changes_nothing(self, real_pi: World) -> None:
        """uninstall --print shows `pi remove` and the folder, and keeps both."""
        assert real_pi.run("install").returncode == 0
        done = real_pi.invoke("uninstall", "--print")
        assert f"remove {real_pi.folder}" in done.stdout
        assert f"would remove {real_pi.folder}" in done.stdout
        assert real_pi.folder.is_dir()
        assert 1 == len(real_pi.user_packages())


class TestConfig:
    @pytest.mark.slow
    def test_tools_are_the_mcp_tools(self, real_pi: World) -> None:
        """The config holds the registry's tools: the MCP tools' names and argument schemas."""
        from pbot_watch.tools.registry import TOOLS

        assert real_pi.run("install").returncode == 0
        config = BridgeConfig.model_validate_json((real_pi.folder / CONFIG_NAME).read_text())
        assert [(t.name, t.input_schema()) for t in TOOLS] == [(t.name, t.parameters) for t in config.tools]

    @pytest.mark.slow
    def test_package_files_are_the_shipped_ones(self, real_pi: World) -> None:
        """package.json and extension.ts are copied byte for byte."""
        assert real_pi.run("install").returncode == 0
        for name in PACKAGE_FILES:
            assert (PACKAGE_SOURCE / name).read_bytes() == (
                real_pi.folder / INSTALLED_NAMES[name]
            ).read_bytes()

    def test_package_json_is_a_pi_package(self) -> None:
        """A pi manifest naming the extension, the gallery keyword, host packages only as peers, our version."""
        manifest = json.loads((PACKAGE_SOURCE / "package.json").read_text())
        # Pi lists a local package's index.ts by its folder: "pbot-watch" in its start-up list.
        assert ["./pbot-watch/index.ts"] == manifest["pi"]["extensions"]
        assert "pbot-watch/index.ts" == INSTALLED_NAMES["extension.ts"]
        assert "pi-package" in manifest["keywords"]
        assert "dependencies" not in manifest
        assert {"*"} == set(manifest["peerDependencies"].values())
        assert __version__ == manifest["version"]


class TestMissingPi:
    def test_missing_pi_is_one_clear_line(self, no_pi: World) -> None:
        """Without pi on PATH, install says so and what to do, and writes nothing."""
        done = no_pi.invoke("install")
        assert 1 == done.returncode
        assert "pi (the Pi coding agent) is not on PATH" in done.stderr
        assert "--pi PATH" in done.stderr
        assert "Traceback" not in done.stderr
        assert not no_pi.folder.exists()

    def test_print_without_pi_still_shows_the_plan(self, no_pi: World) -> None:
        """install --print without pi on PATH warns, shows the plan with `pi install`, and writes nothing."""
        done = no_pi.invoke("install", "--print")
        assert 0 == done.returncode
        assert "warning: pi (the Pi coding agent) is not on PATH" in done.stderr
        assert f"would run: pi install {no_pi.folder}" in done.stdout
        assert not no_pi.folder.exists()

    def test_uninstall_print_without_pi_still_shows_the_plan(self, no_pi: World) -> None:
        """uninstall --print without pi on PATH warns and shows `pi remove`."""
        done = no_pi.invoke("uninstall", "--print")
        assert 0 == done.returncode
        assert "not on PATH" in done.stderr
        assert f"would run: pi remove {no_pi.folder}" in done.stdout

    def test_bad_pi_option(self, no_pi: World, tmp_path: Path) -> None:
        """--pi naming nothing executable is an error naming it."""
        done = no_pi.invoke("install", "--pi", str(tmp_path / "nothing"))
        assert 1 == done.returncode
        assert f"--pi {tmp_path / 'nothing'}: not an executable file" in done.stderr


@pytest.mark.slow
class TestRealPi:
    def test_install_registers_the_folder_with_pi(self, real_pi: World) -> None:
        """Pi's user settings name the package folder, which holds the package and the config."""
        done = real_pi.run("install")
        assert done.returncode == 0, done.stderr
        assert [real_pi.folder] == resolved(real_pi.agent, real_pi.user_packages())
        found = {str(p.relative_to(real_pi.folder)) for p in real_pi.folder.rglob("*") if p.is_file()}
        assert {*INSTALLED_NAMES.values(), CONFIG_NAME} == found
        assert "installed in your Pi user settings" in done.stdout

    def test_second_install_changes_nothing(self, real_pi: World) -> None:
        """Installing again writes no file and leaves one settings entry."""
        assert real_pi.run("install").returncode == 0
        done = real_pi.run("install")
        assert done.returncode == 0, done.stderr
        assert "wrote:" not in done.stdout
        assert 1 == len(real_pi.user_packages())

    def test_install_again_updates_the_extension(self, real_pi: World) -> None:
        """After an upgrade, one install rewrites what differs (here, an old extension)."""
        assert real_pi.run("install").returncode == 0
        installed = real_pi.folder / INSTALLED_NAMES["extension.ts"]
        installed.write_text("// an older version\n")
        (real_pi.folder / "extension.ts").write_text("// where an older version kept it\n")
        done = real_pi.run("install")
        assert f"wrote: {installed}" in done.stdout
        assert (PACKAGE_SOURCE / "extension.ts").read_text() == installed.read_text()
        assert not (real_pi.folder / "extension.ts").exists()

    def test_local_install_writes_the_project_settings(self, real_pi: World) -> None:
        """--local registers the folder in the project's .pi/settings.json, not the user's."""
        done = real_pi.run("install", "--local")
        assert done.returncode == 0, done.stderr
        assert [real_pi.folder] == resolved(real_pi.project / ".pi", real_pi.project_packages())
        assert [] == real_pi.user_packages()

    def test_uninstall_removes_the_entry_and_the_folder(self, real_pi: World) -> None:
        """uninstall runs `pi remove` and deletes the package folder."""
        assert real_pi.run("install").returncode == 0
        done = real_pi.run("uninstall")
        assert done.returncode == 0, done.stderr
        assert [] == real_pi.user_packages()
        assert not real_pi.folder.exists()

    def test_uninstall_when_not_installed(self, real_pi: World) -> None:
        """Uninstalling what is not there says so and succeeds."""
        done = real_pi.run("uninstall")
        assert done.returncode == 0, done.stderr
        assert "(it was not installed)" in done.stdout

    def test_uninstall_local_keeps_the_folder(self, real_pi: World) -> None:
        """A project uninstall leaves the folder the user-level install still uses."""
        assert real_pi.run("install").returncode == 0
        assert real_pi.run("install", "--local").returncode == 0
        done = real_pi.run("uninstall", "--local")
        assert done.returncode == 0, done.stderr
        assert [] == real_pi.project_packages()
        assert 1 == len(real_pi.user_packages())
        assert real_pi.folder.is_dir()


class TestDocs:
    @pytest.mark.parametrize("command", ["install", "uninstall"])
    def test_every_option_is_documented(self, command: str) -> None:
        """Each option of `pbot-watch pi install|uninstall` appears in docs/pi.md."""
        import click

        from pbot_watch.cli import main

        doc = (REPO / "docs" / "pi.md").read_text(encoding="utf-8")
        group = main.get_command(click.Context(main), "pi")  # commands load lazily
        assert isinstance(group, click.Group)
        for param in group.commands[command].params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt != "--help":
                    assert opt in doc, f"pi {command} {opt}"
