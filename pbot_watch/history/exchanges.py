"""Branches into question/answer exchanges, with personal-bot 0.2.3's ``exchanges()`` rules.

An exchange opens at a user message and closes at an assistant answer that stopped with
``stop`` and called no tool. Assistant turns cut by ``toolUse`` or ``length`` leave it open, so a
user message sent meanwhile (steering, follow-up) joins it; ``aborted`` and ``error`` answers
close it as not completed when the next user message arrives. Tool calls, tool results and
thinking never enter the text. The texts and session names are redacted here, where they are
made (``redact.policy.scrub``), so that records and everything built from them hold no secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pbot_watch.history.jstext import UNDEFINED, js_string
from pbot_watch.redact.policy import scrub

USER_LABEL = "用户：\n"
ASSISTANT_LABEL = "\n\n助手：\n"
IMAGE_MARK = "[图片]"

OTHER, USER, ASSISTANT = 0, 1, 2


def pbot_text(content: Any) -> str:
    """A message's text as records keep it: personal-bot 0.2.3's ``text()``, to the letter.

    Strings as they are, text blocks joined by newlines (``String(block.text)``: a block
    without one gives ``undefined``), an image as ``[图片]``: the seed's rule, so an exchange's
    text is the one pbot writes. Raw memory reads the same content by pi-echo's rule instead
    (``memory.extract.source_text``); the two differ on purpose and must not be merged.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(js_string(block["text"]) if "text" in block else UNDEFINED)
        elif kind == "image":
            parts.append(IMAGE_MARK)
    return "\n".join(parts)


@dataclass(slots=True)
class Step:
    """What the exchange rules need of one entry; the rest of the entry is not kept in memory."""

    id: str | None
    parent: str | None
    kind: int = OTHER
    timestamp: Any = None
    text: str | None = None
    stop: Any = None
    tool_call: bool = False
    name: str | None = None
    is_info: bool = False
    links: int = 0


def step_of(entry: dict[str, Any], links: int = 0) -> Step:
    """Reduce an entry dict (ids normalised by ``SessionReader``) to a ``Step``."""
    step = Step(entry.get("id"), entry.get("parentId"), links=links)
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return step
        role = message.get("role")
        if role == "user":
            step.kind = USER
            step.timestamp = entry.get("timestamp")
            step.text = scrub(pbot_text(message.get("content")))
        elif role == "assistant":
            step.kind = ASSISTANT
            step.timestamp = entry.get("timestamp")
            step.stop = message.get("stopReason")
            content = message.get("content")
            # pbot only writes the answer's text when the message has a content key at all.
            step.text = scrub(pbot_text(content)) if "content" in message else None
            step.tool_call = isinstance(content, list) and any(
                isinstance(block, dict) and block.get("type") == "toolCall" for block in content
            )
    elif kind == "session_info":
        step.is_info = True
        name = entry.get("name")
        step.name = scrub(name) if isinstance(name, str) else None
    return step


def _time(value: Any) -> str:
    # A missing timestamp breaks pbot (undefined.localeCompare); an empty string sorts first.
    return value if isinstance(value, str) else ""


@dataclass(slots=True)
class ExchangeBuilder:
    """The ``exchanges()`` state machine, resumable so a grown branch continues where it stopped."""

    done: list[dict[str, Any]] = field(default_factory=list)
    users: list[Step] = field(default_factory=list)
    partial: Step | None = None

    def copy(self) -> ExchangeBuilder:
        return ExchangeBuilder(list(self.done), list(self.users), self.partial)

    def _finish(self, out: list[dict[str, Any]], answer: Step | None, completed: bool) -> None:
        users = self.users
        if not users:
            return
        entries = [*users, answer] if answer is not None else users
        text = "\n\n".join(USER_LABEL + (u.text or "") for u in users)
        if answer is not None and answer.text is not None:
            text += ASSISTANT_LABEL + answer.text
        out.append(
            {
                "entryIds": [e.id for e in entries],
                "from": _time(users[0].timestamp),
                "to": _time(entries[-1].timestamp),
                "completed": completed,
                "text": text,
            }
        )
        self.users = []
        self.partial = None

    def add(self, step: Step) -> None:
        if step.kind == USER:
            partial = self.partial
            if partial is not None and partial.stop in ("aborted", "error"):
                self._finish(self.done, partial, False)
            self.users.append(step)
        elif step.kind == ASSISTANT and self.users:
            self.partial = step
            if step.stop == "stop" and not step.tool_call:
                self._finish(self.done, step, True)

    def result(self) -> list[dict[str, Any]]:
        """The branch's exchanges, closing an open one as not completed (without changing state)."""
        if not self.users:
            return list(self.done)
        tail = ExchangeBuilder([], list(self.users), self.partial)
        out = list(self.done)
        tail._finish(out, tail.partial, False)
        return out


def exchanges(branch: list[Step]) -> list[dict[str, Any]]:
    builder = ExchangeBuilder()
    for step in branch:
        builder.add(step)
    return builder.result()
