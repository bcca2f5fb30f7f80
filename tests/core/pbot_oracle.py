"""personal-bot 0.2.3 itself, run as a test oracle.

The seed diff (``../shared/seeds/``) holds pbot's TypeScript. At test time we pull the added
lines of its two history modules out of the diff, put them beside the Pi 1.6.0 install of the
end-to-end tests (the real pbot imports Pi's ``SessionManager``; see ``tests/e2e/pi_install.py``), and
run them with Node 22's TypeScript support. Nothing of pbot is copied into this repository;
only the glue (two stub helpers and the driver) is ours.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.e2e.pi_install import PiInstall
from tests.support.paths import SHARED

SEED = SHARED / "seeds" / "personal-bot-0.2.3-history.diff.txt"
DRIVER = Path(__file__).with_name("oracle_driver.mjs")
FALLBACK_MARK = "session.name ||="


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


# pbot's own atomic-json module is not in the seed: the same contract (a temporary file in the
# folder, fsync, rename over), and a log of every write, so a test sees who wrote what.
ATOMIC_JSON = """
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
export const writes = [];
export function readJsonFile(directory, name, check) {
  return check(JSON.parse(readFileSync(join(directory, name), "utf8")));
}
export function writeJsonFile(directory, name, value, check) {
  check(value);
  const target = join(directory, name), temp = join(directory, `.${name}.${process.pid}.tmp`);
  const fd = openSync(temp, "w", 0o600);
  writeSync(fd, JSON.stringify(value)); fsyncSync(fd); closeSync(fd);
  renameSync(temp, target); writes.push(name);
}
"""


def write_sources(install: PiInstall) -> Path:
    """pbot's history modules and our glue in a fresh folder below the Pi install; returns it.

    The sources must sit below the Pi install so that Node resolves its package. The caller
    removes the folder when done.
    """
    src = Path(tempfile.mkdtemp(prefix="seed-", dir=install.prefix))
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
        "src/storage/history-files.ts": seed_file("src/storage/history-files.ts"),
        "src/common/json.js": (
            'export const object = value => typeof value === "object" && value !== null && !Array.isArray(value);\n'
        ),
        "src/storage/file-access.js": "export const fileId = id => id;\n",
        "src/storage/atomic-json.js": ATOMIC_JSON,
        "package.json": '{"type": "module"}\n',
    }
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return src


class Oracle:
    """A long-running Node process that answers one job per line."""

    def __init__(self, install: PiInstall) -> None:
        self.node = install.node
        self.src = write_sources(install)
        self.proc = subprocess.Popen(
            [str(self.node), "--experimental-transform-types", "--no-warnings", str(DRIVER), str(self.src)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def record(
        self, content: bytes, record_id: str, previous: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``{"record": ...}`` (``None`` when pbot keeps no record) or ``{"error": ...}``."""
        job: dict[str, Any] = {"content": base64.b64encode(content).decode(), "recordId": record_id}
        if previous is not None:
            job["previous"] = previous
        return self._ask(job)

    def service(
        self,
        root: Path,
        sessions: Path,
        files: list[Path],
        *,
        organize: bool = False,
        agent_dir: Path | None = None,
    ) -> dict[str, Any]:
        """pbot's ``HistoryService`` started afresh for workspace ``root`` (a Pi start): its load, then
        with ``organize`` its summary pass (each summary ``pbot summary of N chars``).

        ``{"writes": [record file names], "warnings": [...]}`` or ``{"error": ...}``.
        """
        job: dict[str, Any] = {
            "op": "service",
            "root": str(root),
            "directory": str(sessions),
            "files": [str(f) for f in files],
            "organize": organize,
        }
        if agent_dir is not None:
            job["agentDir"] = str(agent_dir)
        return self._ask(job)

    def _ask(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
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
