"""Finding and replacing secrets in a text. Pure and deterministic: text in, text out.

One scan of the text by ``HOLDS_ANCHOR`` (every rule's anchors in one expression, run by RE2
on the text's bytes) says whether any anchor occurs; a text without one, which is nearly all of
what Pi writes, costs that scan and nothing more. In the others ``PREFILTER_FINDITER`` finds the
places worth a look, and at each the rules anchored there are tried with ``Pattern.match`` at
that place. Where two rules' spans overlap, the earlier rule in ``RULES`` wins.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pbot_watch.redact.rules import HOLDS_ANCHOR, MARKER_PREFIX, PREFILTER_FINDITER, RULES, RULES_AT

_PRIORITY = {rule: n for n, rule in enumerate(RULES)}
_NONE: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a secret is in a text and what kind it is; it never holds the secret itself."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Redaction:
    """A text with every secret replaced by ``[redacted:<kind>]``, and how many of each kind."""

    text: str
    counts: Mapping[str, int] = field(default_factory=lambda: _NONE)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def marker(kind: str) -> str:
    """What a secret of ``kind`` becomes."""
    return f"{MARKER_PREFIX}{kind}]"


def _candidates(text: str, hits: Iterable[re.Match[str]]) -> Iterator[tuple[int, int, int, str]]:
    """``(priority, start, end, kind)`` of every rule match at these anchor hits that passes its guard."""
    for hit in hits:
        at = hit.start()
        for rule in RULES_AT[hit.group()]:
            match = rule.pattern.match(text, at)
            if match is None or (rule.guard is not None and not rule.guard(match)):
                continue
            start, end = rule.span(match)
            if start < end and not text.startswith(MARKER_PREFIX, start):
                yield _PRIORITY[rule], start, end, rule.kind


def find_secrets(text: str) -> list[Finding]:
    """Every secret in ``text``, by position; where rules overlap, the earlier rule's span wins."""
    if not text or not HOLDS_ANCHOR(text):
        return []  # most texts: one scan, nothing more
    hits = PREFILTER_FINDITER(text)
    taken: list[tuple[int, int, str]] = []
    for _, start, end, kind in sorted(_candidates(text, hits)):
        if not any(start < t_end and t_start < end for t_start, t_end, _ in taken):
            taken.append((start, end, kind))
    return [Finding(kind, start, end) for start, end, kind in sorted(taken)]


def holds_secret(text: str) -> bool:
    """Whether any rule matches ``text``: the gate that text leaving the machine must pass (fail closed)."""
    if not text or not HOLDS_ANCHOR(text):
        return False
    return next(_candidates(text, PREFILTER_FINDITER(text)), None) is not None


def redacted_text(text: str) -> str:
    """``redact(text).text``: what ``policy.scrub`` asks of every text it is given, at the cost
    of one scan and no ``Redaction`` for a text without an anchor (nearly all of them).
    """
    if not text or not HOLDS_ANCHOR(text):
        return text
    return redact(text).text


def redact(text: str) -> Redaction:
    """``text`` with each secret replaced by its marker; an unchanged text is returned as is."""
    if not text or not HOLDS_ANCHOR(text):
        return Redaction(text, _NONE)
    findings = find_secrets(text)
    if not findings:
        return Redaction(text, _NONE)
    parts: list[str] = []
    last = 0
    for finding in findings:
        parts.append(text[last : finding.start])
        parts.append(marker(finding.kind))
        last = finding.end
    parts.append(text[last:])
    counts = Counter(finding.kind for finding in findings)
    return Redaction("".join(parts), MappingProxyType(dict(sorted(counts.items()))))
