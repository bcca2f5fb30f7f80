"""Settings: defaults < config file < environment < command-line flags.

The file is ``$XDG_CONFIG_HOME/pbot-watch/config.toml`` (or the file named by
``PBOT_WATCH_CONFIG``); every key can also come from ``PBOT_WATCH_<KEY>`` (upper case; lists
are separated by ``os.pathsep`` for paths and by commas for globs). A person who writes
``debouce_seconds`` must hear about it, so unknown keys are errors, and every error names the
key, the bad value and the layer it came from (the file path, the variable or the flag).

Relative paths are anchored where they were written: in the file, relative to the file's
folder; in the environment or on the command line, relative to the current directory. The
service runs with a different working directory than the shell that configured it, so a
relative path must never reach it unanchored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pbot_watch.archive.provenance import default_machine, default_user
from pbot_watch.config_paths import (
    CONFIG_ENV,
    ENV_PREFIX,
    default_config_path,
    default_env_file,
    default_state_dir,
)
from pbot_watch.errors import CallerError
from pbot_watch.prefork import wire
from pbot_watch.sources import default_session_roots

# Variables with our prefix that are not settings: they must not be reported as unknown.
DEFAULT_DSN_ENV = "PBOT_WATCH_TEAM_DSN"
NON_SETTING_ENV = frozenset({CONFIG_ENV, DEFAULT_DSN_ENV, wire.DISABLE_ENV})

SourceKind = Literal["default", "file", "env", "flag"]


class CueSettings(BaseModel):
    """The ``[cues]`` table: the memory cue block Pi requests carry after a compaction.

    The block is paid for in every request, so its owner decides what it may cost: nothing
    (``enabled = false``), at most ``max_tokens``, or at most ``max_percent`` of the model's
    context window (the smaller, when both are set). Without a cap, pi-echo's reference (20 %
    of the window, which new lines may exceed) is the only limit.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = Field(True, description="add the memory cue block to Pi's requests after a compaction")
    max_tokens: int | None = Field(None, ge=0, description="cap on the block, in tokens")
    max_percent: float | None = Field(
        None, gt=0, le=100, description="cap on the block, in % of the model's context window"
    )

    def cap(self, context_window: int) -> int | None:
        """The block's cap in tokens for a model with this window (``None``: no cap); 0 when disabled."""
        if not self.enabled:
            return 0
        caps = [self.max_tokens] if self.max_tokens is not None else []
        if self.max_percent is not None:
            caps.append(int(context_window * self.max_percent / 100))
        return min(caps) if caps else None


class PrivacySettings(BaseModel):
    """The ``[privacy]`` table: what of a session's text pbot-watch keeps (docs/privacy.md)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    redact: bool = Field(
        True,
        description="replace secrets by [redacted:<kind>] in records, indexes, cues, tool results and logs",
    )


class TeamSettings(BaseModel):
    """The ``[team]`` table: where the team index is and what may leave this machine for it.

    Everything is off by default: no DSN, no workspace allowed. The DSN is a secret (it may hold
    a password), so it is never a setting's value: the settings name the environment variable
    or the file that holds it, and ``pbot-watch config`` shows only those names (docs/team.md).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enabled: bool = Field(False, description="push records to the team index and allow --team searches")
    dsn_env: str = Field(
        DEFAULT_DSN_ENV, description="environment variable holding the postgresql:// DSN (never printed)"
    )
    dsn_file: Path | None = Field(
        None, description="file holding the DSN on its first line, instead of the variable"
    )
    workspaces: list[str] = Field(
        default_factory=list,
        description="globs of the workspaces whose records may be pushed; none by default",
    )
    raw_memory: bool = Field(
        False,
        description="push raw memory too: tool calls and their outputs, messages, thinking (memory search --team)",
    )
    batch_records: int = Field(200, ge=1, le=10_000, description="records per push transaction")
    retry_seconds: float = Field(
        5, gt=0, description="first wait before pushing again after a failure (doubles)"
    )

    @field_validator("dsn_file", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        value = value.expanduser()
        if not value.is_absolute():
            # The service runs in another folder than the shell that wrote the setting.
            raise ValueError("must be an absolute path (or start with ~)")
        return value


class Settings(BaseModel):
    """Every setting of pbot-watch, validated; unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    sessions: list[Path] = Field(
        default_factory=default_session_roots, description="Pi session roots to watch"
    )
    archive: Path | None = Field(
        None, description="central archive folder; default: each workspace's .pi/pbot/history"
    )
    include: list[str] = Field(
        default_factory=list, description="only workspaces matching one of these globs"
    )
    exclude: list[str] = Field(
        default_factory=list, description="skip workspaces matching any of these globs"
    )
    state_dir: Path = Field(default_factory=default_state_dir, description="service state, status and index")

    debounce_seconds: float = Field(0.15, ge=0, le=60, description="quiet time per file before it is re-read")
    reconcile_seconds: float = Field(300, gt=0, description="full rescan period (watch events can be lost)")
    poll: bool = Field(False, description="use the polling observer instead of inotify/FSEvents")
    poll_seconds: float = Field(1.0, gt=0, description="polling interval when polling")
    max_sessions_in_memory: int = Field(64, ge=1, description="parsed sessions kept in memory")

    idle_seconds: float = Field(30, ge=0, description="no append for this long means the person is idle")
    model: str | None = Field(
        None, description="litellm model for summaries, e.g. openai/gpt-4o-mini; none: offline"
    )
    api_base: str | None = Field(None, description="OpenAI-compatible base URL for the model")
    env_file: Path | None = Field(
        None,
        description="KEY=VALUE file (API keys) for the service; default: $XDG_CONFIG_HOME/pbot-watch/env if present",
    )
    request_timeout: float = Field(60, gt=0, description="seconds for one model call")
    max_calls_per_day: int = Field(500, ge=0, description="model calls per day; 0 disables the model")
    max_tokens_per_day: int = Field(2_000_000, ge=0, description="input+output tokens per day")
    max_calls_per_idle: int = Field(50, ge=0, description="model calls per idle period")
    context_tokens: int | None = Field(
        None, gt=0, description="model context window; default: litellm's, else 8192"
    )
    summary_retry_seconds: float = Field(
        60, gt=0, description="first wait before retrying a failed summary (doubles)"
    )
    summarize_foreign: bool = Field(
        False,
        description="also summarize records with no session file on this machine (copied in, shipped by a repository)",
    )

    machine: str = Field(
        default_factory=default_machine,
        description="this machine's label on the records it writes and pushes (default: host name)",
    )
    user: str = Field(default_factory=default_user, description="the user label beside the machine's")
    team: TeamSettings = Field(
        default_factory=lambda: TeamSettings.model_validate({}), description="the team index ([team] table)"
    )
    cues: CueSettings = Field(
        default_factory=lambda: CueSettings.model_validate({}),
        description="memory cues in Pi requests ([cues] table; the smaller cap wins)",
    )
    privacy: PrivacySettings = Field(
        default_factory=lambda: PrivacySettings.model_validate({}),
        description="secrets in session text ([privacy] table)",
    )

    log_format: Literal["auto", "json", "console"] = Field(
        "auto",
        description="json: JSON lines; console: readable lines; auto: console on a terminal, else json",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="lowest level logged")
    display_labels: Literal["auto", "pbot", "en", "zh"] = Field(
        "auto",
        description="role labels shown for 用户：/助手： ([display] labels): auto follows LANG/LC_*; en: User:/Assistant:",
    )

    @field_validator("sessions", "archive", "state_dir", "env_file", mode="after")
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [Path(v).expanduser() for v in value]
        return Path(value).expanduser() if isinstance(value, Path) else value


PATH_KEYS = frozenset({"sessions", "archive", "state_dir", "env_file"})
PATH_LIST_KEYS = frozenset({"sessions"})
TABLE_KEYS = frozenset(
    {"team", "cues", "privacy"}
)  # TOML tables: set in the file only, and shown as sections


class SettingsError(CallerError):
    """A bad setting; the message names the key, the value and its source. Exit code 2 from every command."""


@dataclass(frozen=True)
class Origin:
    """Where one effective value came from: a layer and, for all but defaults, the exact place."""

    kind: SourceKind
    where: str = ""

    def label(self) -> str:
        if self.kind == "default":
            return "default"
        return f"{self.kind} {self.where}"


@dataclass(frozen=True)
class ResolvedSettings:
    """The settings plus their provenance, for ``pbot-watch config`` and for error messages."""

    settings: Settings
    origins: dict[str, Origin]
    config_file: Path
    config_file_found: bool
    unknown_env: list[str] = field(default_factory=list)

    def origin(self, key: str) -> Origin:
        return self.origins.get(key, Origin("default"))


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper()


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def _anchor(key: str, value: Any, base: Path) -> Any:
    """Make relative path values absolute against ``base``; ``~`` and absolute paths stay as they are."""
    if key not in PATH_KEYS:
        return value

    def one(item: Any) -> Any:
        if not isinstance(item, str | Path):
            return item  # let validation report the wrong type
        text = str(item)
        if not text or text.startswith("~") or Path(text).is_absolute():
            return item
        return os.path.normpath(base / text)

    if isinstance(value, list | tuple):
        return [one(item) for item in value]
    return one(value)


def _flat_tables(raw: dict[str, Any]) -> dict[str, Any]:
    """``[display] labels = ...`` is the setting ``display_labels``.

    The keys of a table that is no settings model of its own (``TABLE_KEYS``) take its name first.
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict) and key not in TABLE_KEYS:
            out.update({f"{key}_{sub}": item for sub, item in value.items()})
        else:
            out[key] = value
    return out


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"cannot read config file {path}: {error}") from error
    import tomllib  # noqa: PLC0415 - only a process that has a config file pays for the parser

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"config file {path} is not valid TOML: {error}") from error
    data: dict[str, Any] = {}
    for key, value in _flat_tables(raw).items():
        # Flags are spelled with dashes, so accept ``debounce-seconds`` as well as ``debounce_seconds``.
        name = key.replace("-", "_")
        if name in data:
            raise SettingsError(f"{key} ({path}): given twice, as {name} and {key}")
        if name in TABLE_KEYS and isinstance(value, dict):
            data[name] = {k.replace("-", "_"): v for k, v in value.items()}
            continue
        data[name] = _anchor(name, value, path.parent)
    return data


def _from_env(environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = {}
    for name, info in Settings.model_fields.items():
        raw = environ.get(env_name(name))
        if raw is None or raw == "" or name in TABLE_KEYS:
            continue
        if name in PATH_LIST_KEYS:
            value: Any = [p for p in raw.split(os.pathsep) if p]
        elif str(info.annotation).startswith("list"):
            value = [p.strip() for p in raw.split(",") if p.strip()]
        else:
            value = raw
        out[name] = _anchor(name, value, Path.cwd())
    known = {env_name(name) for name in Settings.model_fields} | NON_SETTING_ENV
    unknown = sorted(var for var in environ if var.startswith(ENV_PREFIX) and var not in known)
    return out, unknown


def _from_flags(flags: dict[str, Any] | None) -> dict[str, Any]:
    given = {k: v for k, v in (flags or {}).items() if v is not None and v not in ((), [])}
    return {k: _anchor(k, list(v) if isinstance(v, tuple) else v, Path.cwd()) for k, v in given.items()}


def _suggest(key: str) -> str:
    import difflib  # noqa: PLC0415 - only a mistake needs it

    close = difflib.get_close_matches(key, list(Settings.model_fields), n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _describe(error: ValidationError, origins: dict[str, Origin]) -> str:
    lines = []
    for item in error.errors():
        key = str(item["loc"][0]) if item["loc"] else "?"
        place = origins.get(key, Origin("default")).where or "default"
        if item["type"] == "extra_forbidden" and len(item["loc"]) == 2 and key in TABLE_KEYS:
            sub = str(item["loc"][1])
            table = Settings.model_fields[key].annotation
            fields = (
                list(table.model_fields) if isinstance(table, type) and issubclass(table, BaseModel) else []
            )
            import difflib  # noqa: PLC0415 - only a mistake needs it

            close = difflib.get_close_matches(sub, fields, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            lines.append(f"{key}.{sub} ({place}): unknown setting of [{key}]{hint}")
            continue
        if item["type"] == "extra_forbidden":
            lines.append(f"{key} ({place}): unknown setting{_suggest(key)}")
            continue
        sub = "".join(f"[{part}]" for part in item["loc"][1:])
        lines.append(f"{key}{sub} = {item['input']!r} ({place}): {item['msg']}")
    return "invalid settings: " + "; ".join(lines)


def resolve_settings(
    flags: dict[str, Any] | None = None,
    config_file: Path | None = None,
) -> ResolvedSettings:
    """Merge the layers, validate once, and keep where each value came from.

    Flags whose value is ``None`` or empty are treated as not given, so click options can be
    passed through unchanged.
    """
    path = config_file or default_config_path()
    layered: dict[str, Any] = {}
    origins: dict[str, Origin] = {}
    found = path.is_file()
    if found:
        data = _read_file(path)
        layered.update(data)
        origins.update(dict.fromkeys(data, Origin("file", str(path))))
    elif config_file is not None or os.environ.get(CONFIG_ENV):
        # A file the person named explicitly must exist; the default one is optional.
        named_by = "" if config_file is not None else f" (named by {CONFIG_ENV})"
        raise SettingsError(f"config file {path} does not exist{named_by}")
    env, unknown = _from_env(os.environ)
    layered.update(env)
    origins.update({k: Origin("env", env_name(k)) for k in env})
    given = _from_flags(flags)
    layered.update(given)
    origins.update({k: Origin("flag", flag_name(k)) for k in given})
    try:
        settings = Settings.model_validate(layered)
    except ValidationError as error:
        raise SettingsError(_describe(error, origins)) from error
    return ResolvedSettings(settings, origins, path, found, unknown)


def load_settings(flags: dict[str, Any] | None = None, config_file: Path | None = None) -> Settings:
    """Resolve settings (see :func:`resolve_settings`); what every command calls.

    It also sets this process's redaction switch (``redact.policy``), so that every command
    and the service redact as configured.
    """
    from pbot_watch.redact import policy  # noqa: PLC0415 - the rule table is compiled on first use

    settings = resolve_settings(flags, config_file).settings
    policy.configure(settings.privacy.redact)
    return settings


def effective(settings: Settings) -> dict[str, Any]:
    """Settings as plain JSON values, for ``pbot-watch config``."""
    return settings.model_dump(mode="json")


# Defaults that depend on the machine are shown symbolically in the template and the docs.
_SYMBOLIC_DEFAULTS = {
    "sessions": '["~/.pi/agent/sessions"]  # default: ${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions',
    "state_dir": '"~/.local/state/pbot-watch"  # default: ${XDG_STATE_HOME:-~/.local/state}/pbot-watch',
    "machine": '"laptop"  # default: the host name, up to its first dot',
    "user": '"alice"  # default: the login name',
}
# Settings that are unset by default get an example value instead.
_EXAMPLES = {
    "archive": '"~/pbot-archive"',
    "model": '"openai/gpt-4o-mini"',
    "api_base": '"http://127.0.0.1:8000/v1"',
    "env_file": '"~/.config/pbot-watch/env"',
    "include": '["~/projects/*"]',
    "exclude": '["~/scratch/*"]',
    "context_tokens": "128000",
}


def template() -> str:
    """A commented config file listing every key with its default, for ``pbot-watch config --template``.

    It holds no path of this machine, so ``docs/configuration.md`` can quote it verbatim.
    """
    defaults = Settings.model_construct().model_dump(mode="json", exclude=set(_SYMBOLIC_DEFAULTS))
    lines = [
        "# pbot-watch configuration: $XDG_CONFIG_HOME/pbot-watch/config.toml",
        "# Every key may also be set as PBOT_WATCH_<KEY>; flags win over the environment,",
        "# the environment over this file. Uncomment what you change.",
        "",
    ]
    for name, info in Settings.model_fields.items():
        if name in TABLE_KEYS:
            continue
        lines.append(f"# {info.description}" if info.description else f"# {name}")
        if name in _SYMBOLIC_DEFAULTS:
            shown = _SYMBOLIC_DEFAULTS[name]
        elif name in _EXAMPLES and not defaults.get(name):
            shown = f"{_EXAMPLES[name]}  # example; not set by default"
        elif defaults[name] is None:
            shown = "  # not set by default"
        else:
            shown = _toml_value(defaults[name])
        lines.append(f"# {name} = {shown}")
        lines.append("")
    for name in sorted(TABLE_KEYS):
        lines.append(f"# {Settings.model_fields[name].description}")
        lines.append(f"# [{name}]")
        table = defaults[name]
        for key, info in Settings.model_fields[name].annotation.model_fields.items():  # type: ignore[union-attr]
            value = table[key]
            shown = "  # not set by default" if value is None else _toml_value(value)
            lines.append(f"# {key} = {shown}  # {info.description}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a systemd-style ``EnvironmentFile`` (``KEY=VALUE`` lines, ``#``/``;`` comments, quotes).

    The systemd unit hands this file to systemd; launchd has no such key, so the service reads
    the same file itself with this function (see :func:`apply_env_file`).
    """
    values: dict[str, str] = {}
    for number, raw_line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw_line.strip()
        if not line or line[0] in "#;":
            continue
        line = line.removeprefix("export ").lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise SettingsError(f"{path}:{number}: expected KEY=VALUE, got {raw_line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":  # a quoted pair
            value = value[1:-1]
        values[key] = value
    return values


def apply_env_file(settings: Settings, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Load ``settings.env_file`` (or the default env file, if present) into the environment.

    Variables already set win: a key exported by the service manager or the shell is not
    overridden by the file. Returns the names that were set. A configured file that is missing
    is an error; the default one is optional.
    """
    target = os.environ if environ is None else environ
    path = settings.env_file or default_env_file()
    if not path.is_file():
        if settings.env_file is not None:
            raise SettingsError(f"env_file {path} does not exist")
        return []
    applied = []
    for key, value in read_env_file(path).items():
        if key not in target:
            target[key] = value
            applied.append(key)
    return applied
