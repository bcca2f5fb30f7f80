"""``[team]``: where the team index is and what may leave this machine for it.

Everything is off by default: no DSN, no workspace allowed. The DSN is a secret (it may hold a
password), so it is never a setting's value: the settings name the environment variable or the
file that holds it, and ``pbot-watch config`` shows only those names.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_DSN_ENV = "PBOT_WATCH_TEAM_DSN"


class TeamSettings(BaseModel):
    """The ``[team]`` table of the config file."""

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
