"""Secrets never reach a record, an index, a cue or a tool result: the one redaction step.

``redact(text)`` replaces each secret by ``[redacted:<kind>]``; ``find_secrets(text)`` says where
they are (never what); ``holds_secret(text)`` is the fail-closed gate for anything that sends
text off the machine: it refuses what any rule still matches. The rule table is ``RULES``
(``pbot_watch/redact/rules.py`` documents each kind, its shape and its guards).
"""

from __future__ import annotations

from pbot_watch.redact.core import Finding, Redaction, find_secrets, holds_secret, marker, redact
from pbot_watch.redact.rules import KINDS, RULES, Rule

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
