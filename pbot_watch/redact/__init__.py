"""Secrets never reach a record, an index, a cue or a tool result: the one redaction step.

``redact(text)`` replaces each secret by ``[redacted:<kind>]``; ``find_secrets(text)`` says where
they are (never what); ``holds_secret(text)`` is the fail-closed gate for anything that sends
text off the machine: it refuses what any rule still matches. The rule table is ``RULES``
(``pbot_watch/redact/rules.py`` documents each kind, its shape and its guards). ``core`` finds
and replaces (pure); ``policy`` holds whether this process redacts and ``scrub``, what every
boundary calls; ``rules`` is the table; ``audit`` is ``pbot-watch secrets scan`` and ``scrub`` over an archive.

The names are loaded on first use: compiling the rules costs tens of milliseconds, which a
command that redacts nothing (``--help``, ``status``) should not pay.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pbot_watch.redact.core import Finding, Redaction
    from pbot_watch.redact.rules import KINDS, RULES, Rule

_WHERE = {
    **dict.fromkeys(("Finding", "Redaction"), "core"),
    **dict.fromkeys(("KINDS", "RULES", "Rule"), "rules"),
}

__all__ = [
    "KINDS",
    "RULES",
    "Finding",
    "Redaction",
    "Rule",
    "find_secrets",
    "holds_secret",
    "marker",
    "redact",
]


def _core() -> Any:
    return importlib.import_module(f"{__name__}.core")


def redact(text: str) -> Redaction:
    """``text`` with each secret replaced by ``[redacted:<kind>]`` (``core.redact``)."""
    return _core().redact(text)  # type: ignore[no-any-return]


def find_secrets(text: str) -> list[Finding]:
    """Where the secrets in ``text`` are, by kind, never what (``core.find_secrets``)."""
    return _core().find_secrets(text)  # type: ignore[no-any-return]


def holds_secret(text: str) -> bool:
    """Whether any rule matches ``text``: the fail-closed gate (``core.holds_secret``)."""
    return _core().holds_secret(text)  # type: ignore[no-any-return]


def marker(kind: str) -> str:
    """What a secret of ``kind`` becomes (``core.marker``)."""
    return _core().marker(kind)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    # The classes and the table, loaded on first use; the functions above are real attributes.
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
