"""Whether this process redacts, and the one function every boundary calls: ``scrub``.

Redaction is on by default; ``[privacy] redact = false`` turns it off for people who want
pbot's exact text. The setting is read once, where every command and the service load their
settings (``config.load_settings``), and held here for the process: the pure code that turns
entries into texts (``history/exchanges.py``, ``memory/extract.py``) calls ``scrub`` without
carrying the setting through every signature. A process that never loads settings (a test, a
library caller) redacts.

The gate for text that leaves the machine (``refuse_secrets``) ignores the setting: whoever
turned redaction off for their own archive has not agreed to push a key anywhere.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from pbot_watch.errors import PbotWatchError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pbot_watch.redact.core import Redaction

_enabled = True

T = TypeVar("T")


_loaded: Callable[[str], Redaction] | None = None
_loaded_text: Callable[[str], str] | None = None


def redact(text: str) -> Redaction:
    """``core.redact``, imported on first use: compiling the rules is not every command's cost."""
    global _loaded  # noqa: PLW0603 - the real function, once it is loaded
    if _loaded is None:
        from pbot_watch.redact.core import redact as core_redact  # noqa: PLC0415

        _loaded = core_redact
    return _loaded(text)


def _redacted_text(text: str) -> str:
    """``core.redacted_text``, imported on first use as ``redact`` is."""
    global _loaded_text  # noqa: PLW0603 - the real function, once it is loaded
    if _loaded_text is None:
        from pbot_watch.redact.core import redacted_text  # noqa: PLC0415

        _loaded_text = redacted_text
    return _loaded_text(text)


def configure(enabled: bool) -> None:
    """Turn redaction on or off for this process (the ``privacy_redact`` setting)."""
    global _enabled  # noqa: PLW0603 - one process-wide switch, read where texts are made
    _enabled = enabled


def enabled() -> bool:
    return _enabled


def scrub(text: str) -> str:
    """``text`` with its secrets replaced (when redaction is on)."""
    return _redacted_text(text) if _enabled and text else text


def scrub_json(value: T) -> T:
    """Every string in a JSON-shaped value (dicts, lists, strings) scrubbed; the rest as is."""
    if not _enabled:
        return value
    return _walk(value)  # type: ignore[no-any-return]


def scrub_structure(value: T) -> T:
    """A JSON value (a tool call's arguments) redacted as its JSON text reads: ``{"password": "x"}``
    loses ``x``, which no rule could tell from its string alone. Should a marker break the JSON
    (a span ending inside an escape), every string is redacted alone instead.
    """
    if not _enabled or value is None:
        return value
    text = json.dumps(value, ensure_ascii=False)
    redacted = redact(text)
    if not redacted.counts:
        return value
    try:
        return json.loads(redacted.text)  # type: ignore[no-any-return]
    except ValueError:
        return _walk(value)  # type: ignore[no-any-return]


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return _redacted_text(value)
    if isinstance(value, dict):
        return {key: _walk(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item) for item in value]
    return value


class SecretRefused(PbotWatchError, ValueError):
    """A text about to leave the machine still matches a redaction rule."""


def refuse_secrets(text: str, where: str) -> str:
    """``text`` unchanged, or ``SecretRefused`` when any rule still matches it (fail closed).

    ``where`` names the destination for the message; the value is never part of it.
    """
    from pbot_watch.redact.core import holds_secret  # noqa: PLC0415

    if holds_secret(text):
        raise SecretRefused(
            f"refusing to send text to {where}: it still holds a secret (see pbot-watch secrets scan)"
        )
    return text
