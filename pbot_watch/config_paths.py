"""Where the configuration and the service's state live, known without validating any setting.

``config.py`` validates every setting with pydantic; that is the right cost for a command that
uses them, and the wrong one for ``pbot-watch status``, which needs only the state folder and
must answer in a fraction of a second. So the folders, and the state folder's own resolution
(flag, ``PBOT_WATCH_STATE_DIR``, the config file's ``state_dir``, the XDG default), live here
with the standard library only; ``config.py`` builds on them.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_PREFIX = "PBOT_WATCH_"
APP = "pbot-watch"
CONFIG_ENV = ENV_PREFIX + "CONFIG"
STATE_DIR_ENV = ENV_PREFIX + "STATE_DIR"


def xdg_dir(var: str, fallback: str) -> Path:
    """An XDG base folder; relative values are invalid per the spec and fall back to the default."""
    value = os.environ.get(var)
    return Path(value) if value and Path(value).is_absolute() else Path.home() / fallback


def default_state_dir() -> Path:
    """Where the service keeps its SQLite state, status file, lock and search index."""
    return xdg_dir("XDG_STATE_HOME", ".local/state") / APP


def default_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/pbot-watch``: the config file and the default env file live here."""
    return xdg_dir("XDG_CONFIG_HOME", ".config") / APP


def default_config_path() -> Path:
    configured = os.environ.get(CONFIG_ENV)
    return Path(configured).expanduser() if configured else default_config_dir() / "config.toml"


def default_env_file() -> Path:
    """The env file the installed service reads when ``env_file`` is not set (API keys live here)."""
    return default_config_dir() / "env"


def anchored(text: str, base: Path) -> Path:
    """A path setting as written at ``base``: ``~`` expanded, a relative path made absolute there."""
    if not text.startswith("~") and not Path(text).is_absolute():
        return Path(os.path.normpath(base / text))
    return Path(text).expanduser()


def state_dir_unvalidated() -> Path:
    """The state folder as the settings would resolve it, from its own layers only.

    The environment wins over the config file, which wins over the default, as in
    ``config.resolve_settings``. A config file that cannot be read or parsed is passed over
    (``pbot-watch config`` reports it): whoever asks only wants to find the service.
    """
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return anchored(configured, Path.cwd())
    path = default_config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return default_state_dir()
    import tomllib  # noqa: PLC0415 - only a process that has a config file pays for the parser

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return default_state_dir()
    value = data.get("state_dir", data.get("state-dir"))
    return anchored(value, path.parent) if isinstance(value, str) and value else default_state_dir()
