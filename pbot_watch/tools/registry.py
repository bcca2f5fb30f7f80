"""The tools by name, and one way to call one: validate, run, render, and say whose the failure is.

A transport lists ``TOOLS`` (name, title, description, input and output schema) and hands each
call to ``call``. The answer is the text for the model and, on success, the structured result
(exactly the CLI's ``--json``). A failure says what the caller can do about it:

* ``Failure.ARGUMENTS``: fix the arguments (they do not validate, the tool is unknown, or the
  query is wrong: an unknown id or handle, a bad cursor, a date that does not parse);
* ``Failure.UNAVAILABLE``: temporarily unavailable (the database is locked or busy, a file could
  not be read, the pinned session is not indexed up to its current entry yet): not the
  arguments, and the same call may work later;
* ``Failure.INTERNAL``: a bug in pbot-watch, logged with its traceback.

A query that finds nothing is not a failure: it is a result whose text says so.

``scope`` pins the memory tools to one session's branch (``MemoryScope``): a caller that knows
which session is asking sets it, and the model's arguments cannot widen it. A long-lived caller
also passes its ``RecordCatchUp``: the history tools then index the calling session first when
the service does not, and their text says, after its first line, what may be stale
(``catch_up.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from pbot_watch.config import Settings
from pbot_watch.display import language, relabel
from pbot_watch.errors import bounded, failure_kind
from pbot_watch.log import get_logger
from pbot_watch.memory.query import MemoryScope
from pbot_watch.redact.policy import scrub, scrub_json
from pbot_watch.tools import history_read, history_search, recall_memory, search_memory
from pbot_watch.tools.base import Tool, ToolContext
from pbot_watch.tools.catch_up import HISTORY_TOOLS, RecordCatchUp
from pbot_watch.tools.errors import describe_arguments_error

TOOLS: tuple[Tool[Any, Any], ...] = (
    history_search.TOOL,
    history_read.TOOL,
    search_memory.TOOL,
    recall_memory.TOOL,
)
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}

log = get_logger(__name__)


class Failure(StrEnum):
    ARGUMENTS = "arguments"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


@dataclass(frozen=True)
class ToolAnswer:
    """What a call gives back: text for the model, and the structured result or the kind of failure."""

    text: str
    structured: dict[str, Any] | None = None
    """The result as the CLI's ``--json`` prints it; ``None`` when the call failed."""
    failure: Failure | None = None


def call(
    name: str,
    raw_arguments: Any,
    settings: Settings,
    scope: MemoryScope | None = None,
    records: RecordCatchUp | None = None,
) -> ToolAnswer:
    """Validate ``raw_arguments`` (JSON from the model), run the tool and render its result.

    Blocking (SQLite, session files): an async transport runs it in a worker thread.
    """
    started = time.monotonic()
    tool = TOOLS_BY_NAME.get(name)
    if tool is None:
        return _refused(name, f"Unknown tool {name!r}; this server has {', '.join(TOOLS_BY_NAME)}.")
    try:
        args = tool.arguments.model_validate(raw_arguments if raw_arguments is not None else {})
    except ValidationError as error:
        return _refused(name, describe_arguments_error(tool, error))
    note = None
    if records is not None and name in HISTORY_TOOLS:
        note = records.before_history(scope.session_file if scope is not None else None)
    try:
        result = tool.run(args, ToolContext(settings, scope))
        text = tool.render(result, args)
        if note is not None:  # after the first line (what the records are), before the matches
            head, _, rest = text.partition("\n")
            text = f"{head}\nNote: {note}.\n{rest}" if rest else f"{head}\nNote: {note}."
    except Exception as error:  # every failure reaches the caller as an answer, and the log
        kind = failure_kind(error)  # the one mapping of errors to the three kinds (pbot_watch.errors)
        if kind == "arguments":
            return _refused(name, f"{name}: {error}")
        what = bounded(f"{type(error).__name__}: {error}")
        if kind == "unavailable":
            log.warning("tool_unavailable", tool=name, error=what)
            return ToolAnswer(
                f"{name} is temporarily unavailable ({what}). This is not a problem with your arguments; "
                f"call {name} again later.",
                failure=Failure.UNAVAILABLE,
            )
        log.exception("tool_failed", tool=name)
        return ToolAnswer(
            f"{name} failed inside pbot-watch ({what}). This is not a problem with your arguments; "
            "the server log (stderr) has the details.",
            failure=Failure.INTERNAL,
        )
    log.debug("tool_called", tool=name, ms=round((time.monotonic() - started) * 1000, 1))
    # The model reads the role labels in the user's language, as a person would (display.py);
    # the structured result stays the records' text, as --json does (its offsets count that text).
    text = relabel(text, language(settings.display_labels))
    # The indexes hold redacted text; this catches what an index built before redaction still holds.
    return ToolAnswer(scrub(text), scrub_json(result.model_dump(mode="json", by_alias=True)))


def _refused(name: str, message: str) -> ToolAnswer:
    log.info("tool_refused", tool=name, reason=message)
    return ToolAnswer(message, failure=Failure.ARGUMENTS)
