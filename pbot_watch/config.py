"""Settings: defaults < config file < environment < command-line flags.

The file is ``$XDG_CONFIG_HOME/pbot-watch/config.toml`` (or ``PBOT_WATCH_CONFIG``); every key
can also come from ``PBOT_WATCH_<KEY>`` (upper case; lists separated by ``os.pathsep`` for
paths and commas for globs). Validation errors name the key and where it came from.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pbot_watch.sources import default_session_roots

ENV_PREFIX = "PBOT_WATCH_"
APP = "pbot-watch"


def xdg_dir(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value and Path(value).is_absolute() else Path.home() / fallback


def default_state_dir() -> Path:
    """Where the service keeps its SQLite state, status file, lock and search index."""
    return xdg_dir("XDG_STATE_HOME", ".local/state") / APP


def default_config_path() -> Path:
    configured = os.environ.get(ENV_PREFIX + "CONFIG")
    return Path(configured).expanduser() if configured else xdg_dir("XDG_CONFIG_HOME", ".config") / APP / "config.toml"


class Settings(BaseModel):
    """Every setting of pbot-watch, validated; unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    sessions: list[Path] = Field(default_factory=default_session_roots, description="Pi session roots to watch")
    archive: Path | None = Field(None, description="central archive folder; default: each workspace's .pi/pbot/history")
    include: list[str] = Field(default_factory=list, description="only workspaces matching one of these globs")
    exclude: list[str] = Field(default_factory=list, description="skip workspaces matching any of these globs")
    state_dir: Path = Field(default_factory=default_state_dir, description="service state, status and index")

    debounce_seconds: float = Field(0.15, ge=0, le=60, description="quiet time per file before it is re-read")
    reconcile_seconds: float = Field(300, gt=0, description="full rescan period (watch events can be lost)")
    poll: bool = Field(False, description="use the polling observer instead of inotify/FSEvents")
    poll_seconds: float = Field(1.0, gt=0, description="polling interval when polling")
    max_sessions_in_memory: int = Field(64, ge=1, description="parsed sessions kept in memory")

    idle_seconds: float = Field(30, ge=0, description="no append for this long means the person is idle")
    model: str | None = Field(None, description="litellm model for summaries, e.g. openai/gpt-4o-mini; none: offline")
    api_base: str | None = Field(None, description="OpenAI-compatible base URL for the model")
    env_file: Path | None = Field(None, description="file of KEY=VALUE lines (API keys) loaded by the service")
    request_timeout: float = Field(60, gt=0, description="seconds for one model call")
    max_calls_per_day: int = Field(500, ge=0, description="model calls per day; 0 disables the model")
    max_tokens_per_day: int = Field(2_000_000, ge=0, description="input+output tokens per day")
    max_calls_per_idle: int = Field(50, ge=0, description="model calls per idle period")

    log_format: Literal["auto", "json", "console"] = Field("auto", description="json under a service manager")
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("sessions", "archive", "state_dir", "env_file", mode="after")
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [Path(v).expanduser() for v in value]
        return Path(value).expanduser() if isinstance(value, Path) else value


class SettingsError(Exception):
    """A bad setting; the message names the key and its source."""


def _from_env() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is None or raw == "":
            continue
        annotation = str(field.annotation)
        if name == "sessions":
            out[name] = [p for p in raw.split(os.pathsep) if p]
        elif annotation.startswith("list"):
            out[name] = [p.strip() for p in raw.split(",") if p.strip()]
        else:
            out[name] = raw
    return out


def _describe(error: ValidationError, sources: dict[str, str]) -> str:
    lines = []
    for item in error.errors():
        key = str(item["loc"][0]) if item["loc"] else "?"
        where = sources.get(key, "default")
        msg = "unknown setting" if item["type"] == "extra_forbidden" else item["msg"]
        lines.append(f"{key} ({where}): {msg}")
    return "invalid settings: " + "; ".join(lines)


def load_settings(flags: dict[str, Any] | None = None, config_file: Path | None = None) -> Settings:
    """Resolve settings; flags whose value is ``None`` or empty are treated as not given."""
    path = config_file or default_config_path()
    layered: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise SettingsError(f"cannot read {path}: {error}") from error
        layered.update(data)
        sources.update(dict.fromkeys(data, str(path)))
    env = _from_env()
    layered.update(env)
    sources.update({k: f"${ENV_PREFIX}{k.upper()}" for k in env})
    given = {k: v for k, v in (flags or {}).items() if v is not None and v != () and v != []}
    layered.update(given)
    sources.update({k: f"--{k.replace('_', '-')}" for k in given})
    try:
        return Settings.model_validate(layered)
    except ValidationError as error:
        raise SettingsError(_describe(error, sources)) from error


def effective(settings: Settings) -> dict[str, Any]:
    """Settings as plain JSON values, for ``pbot-watch config``."""
    return settings.model_dump(mode="json")
