"""pbot-watch's Pi package in Pi's own terminal UI, under tmux: what a person sees on the screen.

RPC mode shows no renderers and no start-up list, so this drives the real TUI: Pi lists the
package as ``pbot-watch``, and a native tool renders as Pi's own do (a one-line call, a count
and a compact list of hits, the full text on expand).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e import scripted_model
from tests.e2e.pi_harness import MODEL_REF
from tests.e2e.pi_install import PiInstall
from tests.e2e.test_pi_package import REMEMBERED, Scene
from tests.support.openai_server import OpenAIServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

SCREEN_TIMEOUT_S = 60


class Screen:
    """Pi in a detached tmux session on a server of its own (its socket in the test's folder)."""

    def __init__(self, root: Path, script: Path) -> None:
        self.tmux = ["tmux", "-S", str(root / "tmux.sock")]
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", "pi", "-x", "130", "-y", "50", str(script)], check=True
        )

    def text(self) -> str:
        done = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", "pi", "-S", "-200"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "pi", *keys], check=True)

    def wait(self, shown: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + SCREEN_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.text()
            if shown(text):
                return text
            time.sleep(0.3)
        raise AssertionError(f"the screen never showed {what}:\n{self.text()}")

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], check=False, capture_output=True)


@pytest.fixture
def screen(pi_install: PiInstall, tmp_path: Path) -> Iterator[Screen]:
    with OpenAIServer(handler=scripted_model.handler) as model:
        scene = Scene(pi_install, tmp_path, model)
        scene.world.print_turn(
            f"Remember this: the {REMEMBERED} migration starts on Monday.", cwd=scene.project, cont=False
        )
        scene.index()
        # English labels whatever the machine's locale (the labels follow LANG/LC_*).
        env = {k: v for k, v in scene.world.env.items() if k not in ("NO_COLOR", "LC_ALL", "LC_MESSAGES")}
        env |= {"TERM": "xterm-256color", "LANG": "en_US.UTF-8"}
        script = tmp_path / "pi.sh"
        pi = " ".join(shlex.quote(part) for part in pi_install.command())
        script.write_text(
            "#!/bin/sh\n"
            + "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
            + f"cd {shlex.quote(str(scene.project))}\nexec {pi} --model {MODEL_REF} -c\n"
        )
        script.chmod(0o755)
        shown = Screen(tmp_path, script)
        try:
            yield shown
        finally:
            shown.close()


def test_package_and_tools_as_pi_shows_them(screen: Screen) -> None:
    start = screen.wait(lambda text: "[Extensions]" in text, "the start-up list")
    listed = start.splitlines()
    assert "pbot-watch" == listed[listed.index("[Extensions]") + 1].strip()

    screen.keys(f'Find it. [[tool: history_search {{"query": "{REMEMBERED}"}}]]', "Enter")
    text = screen.wait(lambda text: "Final answer" in text, "the tool's result")
    call = next(line.strip() for line in text.splitlines() if "Search conversation history" in line)
    assert f'Search conversation history "{REMEMBERED}"' == call
    lines = [line.strip() for line in text.splitlines()]
    hits = lines.index("2 hits")
    listed_hits = lines[hits + 1 : hits + 3]
    assert all(" · exchange · " in hit for hit in listed_hits), listed_hits
    assert any(f"Remember this: the {REMEMBERED} migration" in hit for hit in listed_hits)
    assert "Read a match with history_read(id)." not in text  # the full text waits for expand

    screen.keys("C-o")  # app.tools.expand
    expanded = screen.wait(lambda text: "Read a match with history_read(id)." in text, "the expanded result")
    assert "User: Remember this" in expanded and "用户" not in expanded
