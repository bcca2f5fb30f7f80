"""Run the real Pi CLI against the scripted model, isolated in a temporary agent folder.

``PiWorld`` owns one temporary ``PI_CODING_AGENT_DIR`` (never the user's own): ``models.json``
points a provider at the scripted server on 127.0.0.1, ``settings.json`` makes compaction keep
little so a manual compaction really drops entries, and ``mcp.json`` registers pbot-watch's
MCP server. ``print_turn`` runs ``pi -p`` (optionally ``-c`` to continue the newest session
of the folder); ``RpcPi`` drives ``pi --mode rpc`` over its JSONL stdin/stdout protocol.

Pi's RPC framing is LF-only JSON lines that may contain U+2028 inside strings, so stdout is read
as bytes and split on b"\\n" only (Pi's docs/rpc.md, "Framing").
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.pi_install import PiInstall
from tests.support.cli import run
from tests.support.processes import LineChild

PROVIDER = "scripted"
MODEL = "scripted-model"
MODEL_REF = f"{PROVIDER}/{MODEL}"
EXTENSION = Path(__file__).with_name("tree_nav.ts")
PRINT_TIMEOUT_S = 90
RPC_TIMEOUT_S = 90


class PiFailed(AssertionError):
    """Pi exited badly or said something the test did not expect; carries its output."""


def models_json(base_url: str) -> dict[str, Any]:
    return {
        "providers": {
            PROVIDER: {
                "name": "Scripted model (loopback)",
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": "not-a-real-key",
                "models": [
                    {
                        "id": MODEL,
                        "name": "Scripted model",
                        "contextWindow": 32000,
                        "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    }
                ],
            }
        }
    }


# Keep only the newest few tokens at a compaction so that the test's short conversation still
# has entries before the cut; no retries, so a scripted HTTP error surfaces at once.
SETTINGS = {
    "compaction": {"enabled": True, "reserveTokens": 2000, "keepRecentTokens": 60},
    "retry": {"enabled": False},
}


@dataclass
class PiWorld:
    """One isolated Pi installation state: agent folder, HOME, environment."""

    pi: PiInstall
    root: Path
    base_url: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def sessions(self) -> Path:
        return self.agent_dir / "sessions"

    @classmethod
    def create(cls, pi: PiInstall, root: Path, base_url: str, environ: Mapping[str, str]) -> PiWorld:
        world = cls(pi, root, base_url)
        (root / "home").mkdir(parents=True, exist_ok=True)
        world.agent_dir.mkdir(parents=True, exist_ok=True)
        (world.agent_dir / "models.json").write_text(json.dumps(models_json(base_url), indent=2))
        (world.agent_dir / "settings.json").write_text(json.dumps(SETTINGS, indent=2))
        env = dict(environ)
        env.update(
            HOME=str(root / "home"),
            PI_CODING_AGENT_DIR=str(world.agent_dir),
            PI_OFFLINE="1",
            PI_SKIP_VERSION_CHECK="1",
            PI_TELEMETRY="0",
            PATH=pi.path_env(environ.get("PATH", "")),
            NO_COLOR="1",
        )
        # Never let Pi find a real provider key and talk to the internet.
        for name in list(env):
            if name.endswith("_API_KEY") or name.startswith(("OPENAI_", "ANTHROPIC_")):
                del env[name]
        world.env = env
        return world

    def pi_cli(
        self, *args: str, cwd: Path, timeout: float = PRINT_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run ``pi ARGS`` to completion (``-p`` turns, ``pi mcp ...``); raise ``PiFailed`` on a bad exit."""
        done = subprocess.run(
            [*self.pi.command(), *args],
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise PiFailed(
                f"pi {' '.join(args)} exited {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return done

    def print_turn(self, prompt: str, *, cwd: Path, cont: bool) -> str:
        """One ``pi -p`` turn (``-c`` continues the folder's newest session); returns Pi's printed answer."""
        args = ["--model", MODEL_REF, *(["-c"] if cont else []), "-p", prompt]
        return self.pi_cli(*args, cwd=cwd).stdout

    def rpc(self, cwd: Path, *args: str) -> RpcPi:
        return RpcPi(
            [*self.pi.command(), "--mode", "rpc", "--model", MODEL_REF, "-e", str(EXTENSION), *args],
            cwd=cwd,
            env=self.env,
        )


class RpcPi(LineChild):
    """``pi --mode rpc`` as a child process: commands with ids, events on a queue."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.records: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._next_id = 0
        super().__init__(argv, cwd=cwd, env=env)

    def received(self, line: bytes) -> None:
        record = line.rstrip(b"\n").removesuffix(b"\r")
        if record:
            try:
                self.records.put(json.loads(record))
            except ValueError:
                self.records.put({"type": "_not_json", "raw": record.decode("utf-8", "replace")})

    def ended(self) -> None:
        self.records.put(None)

    def _fail(self, message: str) -> PiFailed:
        tail = [json.dumps(r)[:300] for r in self.seen[-15:]]
        return PiFailed(
            f"{message}\nlast RPC records:\n"
            + "\n".join(tail)
            + f"\nstderr:\n{self.stderr.decode('utf-8', 'replace')[-3000:]}"
        )

    def wait_for(
        self,
        match: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = RPC_TIMEOUT_S,
        since: int | None = None,
    ) -> dict[str, Any]:
        """The next record that matches; with ``since``, records already read from that index count too."""
        if since is not None:
            for record in self.seen[since:]:
                if match(record):
                    return record
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"timed out after {timeout} s waiting for {what}")
            try:
                record = self.records.get(timeout=left)
            except queue.Empty:
                continue
            if record is None:
                self.records.put(None)
                raise self._fail(f"pi exited ({self.proc.poll()}) while waiting for {what}")
            self.seen.append(record)
            if match(record):
                return record

    def send(self, payload: dict[str, Any]) -> str:
        """Write one command without waiting for its response; returns its id."""
        self._next_id += 1
        request_id = f"e2e-{self._next_id}"
        self._write({**payload, "id": request_id})
        return request_id

    def _write(self, record: dict[str, Any]) -> None:
        self.send_raw(json.dumps(record).encode() + b"\n")

    def ui_request(
        self, method: str, since: int | None = None, timeout: float = RPC_TIMEOUT_S
    ) -> dict[str, Any]:
        """The next extension UI request of this kind (``select``, ``editor``, ``setStatus``, ...)."""
        return self.wait_for(
            lambda r: r.get("type") == "extension_ui_request" and r.get("method") == method,
            f"an extension UI {method} request",
            timeout,
            since=since,
        )

    def answer(self, request: dict[str, Any], value: str | None = None) -> None:
        """Answer a dialog (Pi's docs/rpc-extension-ui.md): a value, or cancel it when ``value`` is None."""
        reply: dict[str, Any] = {"type": "extension_ui_response", "id": request["id"]}
        reply.update({"value": value} if value is not None else {"cancelled": True})
        self._write(reply)

    def command(self, payload: dict[str, Any], timeout: float = RPC_TIMEOUT_S) -> Any:
        """Send one command, return its response ``data``; a ``success: false`` response raises."""
        request_id = self.send(payload)
        response = self.wait_for(
            lambda r: r.get("type") == "response" and r.get("id") == request_id,
            f"response to {payload['type']}",
            timeout,
        )
        if not response.get("success"):
            raise self._fail(f"{payload} failed: {response.get('error')}")
        return response.get("data")

    def prompt(self, message: str, timeout: float = RPC_TIMEOUT_S) -> dict[str, Any]:
        """Send a prompt and wait until Pi has settled (no retry, compaction or follow-up left)."""
        data = self.command({"type": "prompt", "message": message}, timeout) or {}
        if data.get("disposition") in ("started", "queued"):
            self.wait_for(
                lambda r: r.get("type") == "agent_settled", f"agent_settled after {message!r}", timeout
            )
        return data

    def navigate(self, entry_id: str, *, summarize: bool) -> str:
        """Move the leaf with the test extension; returns the new leaf id."""
        mark = len(self.seen)  # the notification may arrive before the prompt's response
        self.command({"type": "prompt", "message": f"/e2e-nav {entry_id}{' summarize' if summarize else ''}"})
        note = self.wait_for(
            lambda r: (
                r.get("type") == "extension_ui_request"
                and r.get("method") == "notify"
                and str(r.get("message", "")).startswith("e2e-nav")
            ),
            "the e2e-nav notification",
            since=mark,
        )
        message = str(note["message"])
        if not message.startswith("e2e-nav ok "):
            raise self._fail(message)
        return message.removeprefix("e2e-nav ok ")

    def entries(self) -> dict[str, Any]:
        return self.command({"type": "get_entries"})


def newest_session(sessions: Path) -> Path:
    files = sorted(sessions.rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    if not files:
        raise PiFailed(f"Pi wrote no session file under {sessions}")
    return files[-1]


def child_processes(pid: int) -> dict[int, list[str]]:
    """The direct children of a process and their argv, from Linux's /proc (the e2e tests run on Linux)."""
    found: dict[int, list[str]] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            found[child] = [arg.decode(errors="replace") for arg in argv if arg]
    return found


def install_package(world: PiWorld, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``pbot-watch pi install ARGS`` into the world's agent folder, with its Pi first on PATH."""
    env = {**world.env, "PATH": f"{world.pi.bin_dir}{os.pathsep}{world.env['PATH']}"}
    done = run("pi", "install", *args, env=env, cwd=cwd, timeout=PRINT_TIMEOUT_S)
    if done.returncode != 0:
        raise PiFailed(f"pbot-watch pi install failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done
