"""The redaction gate before the team index: fail closed.

Records are redacted when they are written; the gate is the last look before a text leaves the
machine. A text that still matches a secret rule stays home, and so does a text the check
raises on: nothing leaves rather than something unchecked.
"""

from __future__ import annotations

from collections.abc import Callable

from pbot_watch.redact import holds_secret
from pbot_watch.team.rows import Gate


def secret_gate() -> Gate:
    """The gate of the secret rules of ``pbot_watch.redact``."""
    return guarded(holds_secret)


def guarded(check: Callable[[str], bool]) -> Gate:
    """``check`` as a gate that holds a text back when the check fails."""

    def gate(text: str) -> bool:
        if not text:
            return False
        try:
            return bool(check(text))
        except Exception:  # noqa: BLE001 - a gate that fails holds the text back
            return True

    return gate
