"""Install the real Pi CLI and a Node runtime new enough for it, from the npm registry, into a cache.

The end-to-end test drives the real Pi coding agent. Pi 1.6 needs Node >= 22.19, which many
machines (and this project's CI) do not have, so the Node runtime comes from the npm registry
too: the ``node-<os>-<arch>`` packages ship the official Node binaries. Both are pinned so a
new Pi release cannot change what the test sees, and both go into one prefix inside a cache
folder that outlives the test run: a warm run installs nothing.

Where the cache lives (resolved from the *real* environment: the test suite's conftest points
HOME and XDG_* at a temporary folder per test, so callers pass the environment captured at
import time):

    ${PBOT_WATCH_E2E_CACHE:-${XDG_CACHE_HOME:-~/.cache}/pbot-watch-e2e}

A prefix is complete only once its stamp file exists; it is built in a temporary sibling folder
and renamed into place, so an interrupted install never leaves a half-usable prefix, and a lock
file keeps two concurrent runs from installing at once.

Run it by hand to warm the cache (CI can do so before pytest)::

    python tests/e2e/pi_install.py          # prints the paths of node and pi as JSON
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = "1.6.0"
# Pi >= 0.74 calls module.enableCompileCache and declares engines.node >= 22.19.0.
NODE_VERSION = "22.23.5"
NODE_MINIMUM = (22, 19, 0)
STAMP = "installed.json"
NPM_TIMEOUT_S = 240  # below the test's 300 s pytest timeout, so a crawling registry skips instead
PING_TIMEOUT_S = 20
# npm error codes that mean "the registry cannot be reached", not "the install is broken".
_OFFLINE_CODES = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "ENETUNREACH",
    "EHOSTUNREACH",
    "ERR_SOCKET_TIMEOUT",
    "UNABLE_TO_GET_ISSUER_CERT",
    "SELF_SIGNED_CERT",
)


class Unavailable(Exception):
    """Pi cannot be had on this machine (no npm, no registry, no Node for this platform): skip, don't fail."""


class InstallFailed(Exception):
    """npm was there and the registry answered, yet the install broke: a real failure worth a red test."""


@dataclass(frozen=True)
class PiInstall:
    """Where the installed pieces are."""

    prefix: Path
    node: Path
    pi_cli: Path  # the package's bin script (JavaScript), run as ``node pi_cli ...``
    pi_package: Path  # the installed package folder: its docs/ hold mcp.md and cli.md

    def command(self) -> list[str]:
        """argv prefix that runs Pi with the pinned Node, whatever node is first on PATH."""
        return [str(self.node), str(self.pi_cli)]

    @property
    def bin_dir(self) -> Path:
        """The prefix's ``node_modules/.bin``: ``pi`` there runs with the first ``node`` on PATH."""
        return self.prefix / "node_modules" / ".bin"

    def path_env(self, base_path: str) -> str:
        """PATH with the pinned Node first: Pi spawns ``node`` for extensions and tools by name."""
        return f"{self.node.parent}{os.pathsep}{base_path}"


def cache_root(environ: Mapping[str, str]) -> Path:
    """The cache folder, from an environment captured before any test isolated HOME."""
    explicit = environ.get("PBOT_WATCH_E2E_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path(environ.get("HOME") or Path.home()) / ".cache"
    return base / "pbot-watch-e2e"


def node_package_name() -> str | None:
    """The npm package holding the official Node binary for this machine, if there is one."""
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win"}.get(platform.system())
    machine = platform.machine().lower()
    arch = {
        "x86_64": "x64",
        "amd64": "x64",
        "aarch64": "arm64",
        "arm64": "arm64",
        "armv7l": "armv7l",
        "ppc64le": "ppc64le",
        "s390x": "s390x",
    }.get(machine)
    if system is None or arch is None:
        return None
    return f"node-{system}-{arch}"


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def node_version(node: Path | str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    return parse_version(out.stdout) if out.returncode == 0 else None


def ensure_pi(environ: Mapping[str, str]) -> PiInstall:
    """The pinned Pi and Node, installed into the cache on first use; raises ``Unavailable``/``InstallFailed``."""
    npm = shutil.which("npm", path=environ.get("PATH"))
    if npm is None:
        raise Unavailable("npm is not on PATH: cannot install the Pi CLI from the npm registry")
    node_pkg = node_package_name()
    system_node = shutil.which("node", path=environ.get("PATH"))
    if node_pkg is None and (system_node is None or (node_version(system_node) or (0, 0, 0)) < NODE_MINIMUM):
        raise Unavailable(
            f"no node package on the npm registry for {platform.system()}/{platform.machine()} and no "
            f"node >= {'.'.join(map(str, NODE_MINIMUM))} on PATH (Pi {PI_VERSION} needs it)"
        )
    root = cache_root(environ)
    name = f"pi-{PI_VERSION}-" + (f"{node_pkg}-{NODE_VERSION}" if node_pkg else "system-node")
    prefix = root / name
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (prefix / STAMP).is_file():
            _install(npm, root, prefix, node_pkg, environ)
    return _located(prefix, node_pkg, system_node)


def _install(npm: str, root: Path, prefix: Path, node_pkg: str | None, environ: Mapping[str, str]) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        (staging / "package.json").write_text(json.dumps({"name": "pbot-watch-e2e-pi", "private": True}))
        specs = [f"{PI_PACKAGE}@{PI_VERSION}"] + ([f"{node_pkg}@{NODE_VERSION}"] if node_pkg else [])
        env = dict(environ)
        # npm's own download cache sits beside the prefix, so a fresh prefix (new pin) downloads
        # only what changed, and nothing is written under the user's ~/.npm.
        env["npm_config_cache"] = str(root / "npm-cache")
        env["npm_config_update_notifier"] = "false"
        reachable, why = _registry_answers(npm, env)
        if not reachable:  # fail fast: npm's own retries take minutes against a dead registry
            raise Unavailable(f"the npm registry cannot be reached: {why}")
        cmd = [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--loglevel=error", *specs]
        try:
            done = subprocess.run(
                cmd, cwd=staging, env=env, capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as error:
            raise Unavailable(
                f"npm install did not finish within {NPM_TIMEOUT_S} s (registry too slow?)"
            ) from error
        if done.returncode != 0:
            output = done.stdout + done.stderr
            if any(code in output for code in _OFFLINE_CODES) or not _registry_answers(npm, env)[0]:
                raise Unavailable(f"the npm registry cannot be reached: {_first_lines(output)}")
            raise InstallFailed(f"{' '.join(cmd[1:])} failed:\n{_first_lines(output, 30)}")
        (staging / STAMP).write_text(json.dumps({"pi": PI_VERSION, "node": node_pkg and NODE_VERSION}) + "\n")
        if prefix.exists():  # a half-built prefix of an older, interrupted layout
            shutil.rmtree(prefix)
        staging.chmod(0o755)  # mkdtemp makes it private; the cache may be shared by CI and people
        staging.rename(prefix)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _registry_answers(npm: str, env: Mapping[str, str]) -> tuple[bool, str]:
    """One quick ``npm ping`` without retries: (reachable, npm's words when not)."""
    argv = [npm, "ping", "--fetch-retries=0", f"--fetch-timeout={PING_TIMEOUT_S * 1000}"]
    try:
        done = subprocess.run(
            argv, env=dict(env), capture_output=True, text=True, timeout=PING_TIMEOUT_S + 15, check=False
        )
    except subprocess.TimeoutExpired:
        return False, f"npm ping did not answer within {PING_TIMEOUT_S} s"
    except OSError as error:
        return False, str(error)
    return done.returncode == 0, _first_lines(done.stdout + done.stderr)


def _first_lines(text: str, count: int = 3) -> str:
    return " | ".join(line for line in text.strip().splitlines()[:count])


def _located(prefix: Path, node_pkg: str | None, system_node: str | None) -> PiInstall:
    modules = prefix / "node_modules"
    if node_pkg is not None:
        node = modules / node_pkg / "bin" / ("node.exe" if node_pkg.startswith("node-win") else "node")
    else:
        node = Path(system_node or "node")
    package = modules / PI_PACKAGE
    manifest = json.loads((package / "package.json").read_text())
    bin_field = manifest["bin"]
    relative = (
        bin_field if isinstance(bin_field, str) else bin_field.get("pi") or next(iter(bin_field.values()))
    )
    install = PiInstall(prefix=prefix, node=node, pi_cli=package / relative, pi_package=package)
    found = node_version(install.node)
    if found is None or found < NODE_MINIMUM:
        raise InstallFailed(
            f"{install.node} is not a working node >= {'.'.join(map(str, NODE_MINIMUM))}: {found}"
        )
    if manifest.get("version") != PI_VERSION:
        raise InstallFailed(f"{package} is version {manifest.get('version')}, expected {PI_VERSION}")
    return install


def main() -> int:
    try:
        install = ensure_pi(os.environ)
    except Unavailable as error:
        print(f"pi unavailable: {error}", file=sys.stderr)
        return 0  # nothing to warm; the test will skip with the same reason
    print(json.dumps({"node": str(install.node), "pi": str(install.pi_cli), "prefix": str(install.prefix)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
