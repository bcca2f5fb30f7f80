"""The redaction gate before the team index: fail closed.

Records are redacted when they are written; the gate is the last look before a text leaves the
machine. A text that still matches a secret rule stays home. When the redaction core cannot be
loaded, or raises, every text counts as holding a secret: nothing leaves rather than something
unchecked.
"""

from __future__ import annotations

from collections.abc import Callable

from pbot_watch.team.rows import Gate


def _closed(text: str) -> bool:  # noqa: ARG001 - the gate's signature
    return True


def secret_gate() -> tuple[Gate, str | None]:
    """The gate, and why it holds everything back when the redaction core is unavailable."""
    try:
        from pbot_watch.redact import (  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
            holds_secret,  # the redaction core; loaded when first needed
        )
    except ImportError as error:
        return _closed, f"the redaction core cannot be loaded ({error}): nothing is pushed"
    return _guarded(holds_secret), None


def _guarded(check: Callable[[str], bool]) -> Gate:
    def gate(text: str) -> bool:
        if not text:
            return False
        try:
            return bool(check(text))
        except Exception:  # noqa: BLE001 - a gate that fails holds the text back
            return True

    return gate
