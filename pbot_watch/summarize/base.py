"""What every summarizer is, what it is given, and how a summary is identified (pure).

A summary node's input is rebuilt exactly as pbot 0.2.3's ``organize()`` builds it: the
children's texts, each headed by its time span (and ``；未完成`` when not completed), joined by
blank lines. The same input, summarizer and prompt always give the same cache key, so a fork
that shares a prefix, a node whose record was re-keyed, or a file Pi rewrote never pays for a
second model call. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pbot_watch.errors import PbotWatchError
from pbot_watch.history.jstext import utf16_len
from pbot_watch.shorten import shorten

KEY_ALGORITHM = "sha256"
UNFINISHED_MARK = "；未完成"
PART_SEPARATOR = "\n\n"
# The longest answer taken as a summary, in UTF-16 units. A model asked for at most 2,048
# output tokens writes well under this; one that ignores ``max_tokens`` (a 3,000,000-character
# answer was seen) would grow the record by megabytes and make the next level's input as large.
MAX_SUMMARY_UNITS = 16_000
# Usage figures a provider reports are clamped to this range per call: a negative count would
# lower the day's total below its cap, and one past SQLite's 64-bit integers could not be stored.
MAX_TOKENS_PER_CALL = 10_000_000
MAX_COST_PER_CALL_USD = 1_000.0
# Error texts kept in status, logs and the failure table: a message can quote a whole answer.
ERROR_CHARS = 300


@dataclass(frozen=True, slots=True)
class Summary:
    """One summary and what it cost; ``calls`` counts the model requests it took (0 offline or cached)."""

    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0


class Summarizer(Protocol):
    """Turns one node's input into a summary.

    ``id`` names the summarizer and its version (``offline/1``, ``litellm/openai/gpt-4o-mini``):
    it goes into the cache key and onto the node, so a better summarizer can upgrade a worse one.
    ``summarize`` raises ``Cancelled`` soon after ``cancel`` is set, ``SummaryFailed`` (or a
    subclass) when no usable summary came back; it never returns an empty text.
    """

    @property
    def id(self) -> str: ...

    @property
    def prompt_version(self) -> str: ...

    @property
    def offline(self) -> bool: ...

    def summarize(self, text: str, cancel: threading.Event) -> Summary: ...


class Cancelled(PbotWatchError):  # a state, not an error
    """The person came back: the call was abandoned and the node stays pending."""


class SummaryFailed(PbotWatchError):
    """No usable summary: the node stays pending, its error is counted and retried later."""


class EmptySummary(SummaryFailed):
    """The model answered with nothing (or only whitespace)."""


class NotShorter(SummaryFailed):
    """Summarizing an over-long input in parts did not make it shorter; merging would never end."""


class BadAnswer(SummaryFailed):
    """The model answered with something that cannot be a summary: not well-formed text, longer
    than ``MAX_SUMMARY_UNITS`` or than its input. Counted and retried later, like any failure.
    """


class ModelRefused(SummaryFailed):
    """The model refuses every request (bad key, unknown model, no permission): asking for the
    next node would fail the same way, so the run stops and status shows why.
    """


class LimitReached(PbotWatchError):  # a state, not an error
    """A daily or per-idle limit is reached: the queue waits, and status says which one."""


def node_input(children: Sequence[Mapping[str, Any]]) -> str:
    """The text pbot's ``organize()`` gives the summarizer for a node with these children."""
    return PART_SEPARATOR.join(
        f"[{child.get('from', '')} — {child.get('to', '')}{'' if child.get('completed') else UNFINISHED_MARK}]\n"
        f"{child.get('text', '')}"
        for child in children
    )


def content_key(text: str, summarizer_id: str, prompt_version: str) -> str:
    """The cache key of a summary: a tagged hash of the exact input, the summarizer and its prompt.

    Fields are length-prefixed so no two different triples can produce the same bytes.
    """
    digest = hashlib.sha256()
    for part in (summarizer_id, prompt_version, text):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return f"{KEY_ALGORITHM}:{digest.hexdigest()}"


def split_units(text: str, budget: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``budget`` UTF-16 units (pbot measures ``.length``).

    Cuts fall between code points, so a surrogate pair (an emoji, a rare CJK character) is never
    split; a piece is never empty, even when ``budget`` is smaller than one character.
    """
    if budget < 2:  # one astral character needs two units
        raise ValueError("budget must be at least 2 UTF-16 units")
    pieces: list[str] = []
    start = 0
    used = 0
    for index, char in enumerate(text):
        width = 2 if ord(char) > 0xFFFF else 1  # UTF-16 width of an astral code point
        if used + width > budget and index > start:
            pieces.append(text[start:index])
            start, used = index, 0
        used += width
    if start < len(text) or not pieces:
        pieces.append(text[start:])
    return pieces


def summarize_in_parts(
    text: str,
    budget: int,
    ask: Callable[[str], Summary],
    model: str,
) -> Summary:
    """Pbot's ``historySummarizer`` loop: while the input is over budget, summarize it in parts
    and join the parts; every round must shrink the text, else ``NotShorter``. The last round is
    one call on an input that fits. Tokens and calls of every round are added up.
    """
    input_tokens = output_tokens = calls = 0
    cost = 0.0
    while utf16_len(text) > budget:
        parts: list[str] = []
        for piece in split_units(text, budget):
            part = ask(piece)
            input_tokens += part.input_tokens
            output_tokens += part.output_tokens
            calls += part.calls
            cost += part.cost_usd
            parts.append(part.text)
        smaller = PART_SEPARATOR.join(parts)
        if utf16_len(smaller) >= utf16_len(text):
            raise NotShorter(
                f"summarizing {utf16_len(text)} units in parts gave {utf16_len(smaller)} units; retry later"
            )
        text = smaller
    final = ask(text)
    return Summary(
        text=final.text,
        model=final.model or model,
        input_tokens=input_tokens + final.input_tokens,
        output_tokens=output_tokens + final.output_tokens,
        calls=calls + final.calls,
        cost_usd=cost + final.cost_usd,
    )


def budget_for_context(context_tokens: int | None, default_context: int = 8192) -> int:
    """Pbot's budget: half the context window, between 2,000 and 24,000 units.

    An unknown model gets a context of ``default_context`` tokens, small enough for the local
    models people run with their default window.
    """
    window = context_tokens if context_tokens and context_tokens > 0 else default_context
    return max(2000, min(24000, window // 2))


def check_answer(answer: str, source: str | None = None, limit: int = MAX_SUMMARY_UNITS) -> str:
    r"""The answer, stripped, if it can stand for ``source`` as its summary; else ``SummaryFailed``.

    Well-formed text (no lone surrogate: JSON lets a model send ``"\ud800"``, and neither SQLite
    nor a record file could hold it), not empty, at most ``limit`` units and shorter than the
    input it summarizes (an answer that is not shorter would make every level above it grow).
    Without ``source`` (one part of an input cut in parts, whose shrinking ``summarize_in_parts``
    checks as a whole) the length is checked against ``limit`` only.
    """
    text = answer.strip()
    if not text:
        raise EmptySummary("the model returned an empty summary")
    units = utf16_len(text)
    if units > limit:
        raise BadAnswer(f"the model's answer has {units} UTF-16 units, more than a summary's {limit}")
    source_units = utf16_len(source) if source is not None else units + 1
    if units >= source_units:
        raise BadAnswer(
            f"the model's answer ({units} units) is not shorter than its input ({source_units} units)"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadAnswer(
            f"the model's answer is not well-formed text: a lone surrogate U+{ord(text[error.start]):04X}"
            f" at character {error.start}"
        ) from None
    return text


def usage_count(value: object) -> int:
    """A token count a provider reported, as an int in ``0..MAX_TOKENS_PER_CALL`` (0 when not a number)."""
    if not isinstance(value, (int, float, str)):
        return 0
    try:
        count = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return min(max(count, 0), MAX_TOKENS_PER_CALL)


def usage_cost(value: object) -> float:
    """A cost in USD, as a float in ``0..MAX_COST_PER_CALL_USD`` (0 when not a finite number)."""
    if not isinstance(value, (int, float, str)):
        return 0.0
    try:
        cost = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    if math.isnan(cost):
        return 0.0
    return min(max(cost, 0.0), MAX_COST_PER_CALL_USD)


def bounded(text: str, limit: int = ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis): status and logs never hold a whole answer."""
    return shorten(text, limit)


def describe_error(error: BaseException, limit: int = ERROR_CHARS) -> str:
    """One line for status and logs: the error's class and message, no traceback.

    litellm repeats itself ("litellm.AuthenticationError: AuthenticationError: OpenAIException
    - ..."), so a message that already starts with the class name is not prefixed again.
    """
    name = type(error).__name__
    message = " ".join(str(error)[: limit * 4].split())  # a message may quote megabytes
    for prefix in (f"litellm.{name}: ", f"{name}: "):
        message = message.removeprefix(prefix)
    message = bounded(message, limit)
    return f"{name}: {message}" if message else name
