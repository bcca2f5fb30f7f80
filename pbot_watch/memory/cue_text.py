"""How a cue line reads: the call and the outcome of one tool event, in the fewest tokens. Pure.

A cue line is paid for in every request after a compaction, so each part of it must say
something the model can use:

* **paths are relative to the session's cwd** (and the home folder is ``~``): in a long session
  almost every call starts with the same absolute workspace path, which tells calls apart not
  at all; a leading ``cd <cwd> &&`` goes for the same reason;
* **a call that must be cut keeps what names it**: a path its last components (the basename
  first), a command its verb and distinctive arguments, never a shared prefix;
* **an outcome carries information**: a successful edit or write is ``✓``; a failure shows the
  line that says what went wrong (a compiler's or linter's ``error`` line, a failed test, an
  exit code), not a quoted code frame or a stack line; a line is cut between words, never
  inside one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pbot_watch.history.jstext import collapse_whitespace
from pbot_watch.redact.policy import scrub

CALL_CHARS = 60
"""Longest shown argument of a call (``bash(...)``)."""
OUTCOME_CHARS = 80
"""Longest shown outcome line."""
ERROR_CHARS = 110
"""Longest shown error line: what went wrong is what a failure's line is for."""
ELLIPSIS = "…"
OK = "✓"
FAILED = "✗"

_HOME = re.compile(r"^(/home/[^/]+|/Users/[^/]+|/root)(?=/|$)")
_SEPARATORS = frozenset({"&&", "||", ";", "|"})
_NOISE = frozenset({"2>&1", ">/dev/null", "2>/dev/null", "&>/dev/null", "1>/dev/null"})
_PAGER = frozenset({"tail", "head"})

_CODE_FRAME = re.compile(r"^\s*(?:>\s*)?\d+\s*[|│]|^[\s^~|│]*\^[\s^~]*$|^\s+at\s|^\s*File \".*\", line \d+")
"""A quoted source line (``> 12 | code``), a caret line, or a stack frame: context, not the error."""
_ERROR_LINE = re.compile(
    r"(?:[Ee]rror|ERROR)(?:\[\w+\])?(?::|\s+TS\d+)|^\s*\d+:\d+\s+error\b|(?:Error|Exception):"
    r"|^\s*(?:FAIL|ERROR)|^\s*[✗×✕✖]\s|panicked|^E\s+\S",
    re.MULTILINE,  # case-sensitive: these tools spell it so, and ignoring case costs a third of the scan
)
"""What a compiler, linter, runtime or test runner prints where it says what went wrong."""
ISSUE_LINE = re.compile(
    r"\b(?:errors?|fail(?:s|ed|ure|ures|ing)?|exception|traceback|panic|fatal|assertion\w*)\b|[✗✖]",
    re.IGNORECASE,
)
"""A line of a failed event that names a problem; counted as the event's issues."""
_STATUS = re.compile(
    r"^(?:Command exited with code (?P<code>-?\d+)|Command (?P<aborted>aborted)"
    r"|Command timed out after (?P<timeout>\d+) seconds.*|Command terminated without an exit code)$"
)
"""The status line Pi's bash tool appends to a failed command's output."""
_SUMMARY_LINE = re.compile(
    r"\b(?:pass(?:ed|es|ing)?|succe(?:ss|ssful|eded)|ok|done|built|compiled|changed|finished|"
    r"insertions?|deletions?|problems?|warnings?|errors?|tests?|files?)\b",
    re.IGNORECASE,
)
"""A line where a build, test run or git says how it went (``Tests 12 passed (12)``)."""
SUMMARY_LOOKBACK = 6
"""Lines from the end searched for such a line: test runners end with timings after it."""
_PI_NOTE = re.compile(r"^\[Showing (?:lines|last) .*\]$")
"""Pi's note under a truncated output: not what the command said."""
NO_OUTPUT = "(no output)"


@dataclass(frozen=True)
class Place:
    """Where a session ran: its cwd, and the home folder above it (for ``~``)."""

    cwd: str | None

    @property
    def home(self) -> str | None:
        found = _HOME.match(self.cwd or "")
        return found[1] if found else None

    def relative(self, text: str) -> str:
        """``text`` with the cwd's paths relative to it and the home folder as ``~``."""
        cwd = (self.cwd or "").rstrip("/")
        if len(cwd) > 1 and cwd in text:
            text = _under(cwd).sub(lambda m: "" if m[0].endswith("/") else ".", text)
        home = self.home
        if home is not None and home in text:
            text = _at_home(home).sub("~", text)
        return text


# A session has one cwd: its patterns are made once, not for each of its thousands of lines.
@functools.lru_cache(maxsize=64)
def _under(cwd: str) -> re.Pattern[str]:
    return re.compile(re.escape(cwd) + r"(?:/|(?=[\s'\"):;,]|$))")


@functools.lru_cache(maxsize=64)
def _at_home(home: str) -> re.Pattern[str]:
    return re.compile(re.escape(home) + r"(?=/|[\s'\"):;,]|$)")


@functools.lru_cache(maxsize=64)
def _cd_into(cwd: str) -> re.Pattern[str]:
    return re.compile(
        r"^\s*cd\s+(?:"
        + "|".join(re.escape(f"{q}{cwd}{s}{q}") for q in ("", '"', "'") for s in ("", "/"))
        + r")\s*(?:&&|;)\s*"
    )


def without_cd(command: str, place: Place) -> str:
    """The command without a leading ``cd <cwd> &&`` (or ``;``): the session is there already."""
    cwd = (place.cwd or "").rstrip("/")
    if not cwd or "cd" not in command:
        return command
    return _cd_into(cwd).sub("", command, count=1)


def cut_words(text: str, limit: int) -> str:
    """``text`` on one line; when longer than ``limit``, its head and tail cut between words.

    About two thirds of the room go to the head, where a line says what happened. Only a first
    word longer than all of it is cut (a path or hash with nothing else to show).
    """
    flat = collapse_whitespace(text).strip()
    if len(flat) <= limit:
        return flat
    words = flat.split(" ")
    room = limit - len(ELLIPSIS) - 2
    head: list[str] = []
    used = 0
    for word in words:
        cost = len(word) + (1 if head else 0)
        if used + cost > room * 2 // 3:
            break
        head.append(word)
        used += cost
    if not head:
        head, used = [words[0][: room * 2 // 3]], room * 2 // 3
    tail: list[str] = []
    for word in reversed(words[len(head) :]):
        if used + len(word) + 1 > room:
            break
        tail.insert(0, word)
        used += len(word) + 1
    return " ".join([*head, ELLIPSIS, *tail])


def short_path(path: str, limit: int = CALL_CHARS) -> str:
    """A path cut from the left, keeping its basename and as many parents as fit."""
    if len(path) <= limit:
        return path
    parts = path.rstrip("/").split("/")
    kept = [parts.pop()]
    while parts and len("/".join([parts[-1], *kept])) + 2 <= limit:
        kept.insert(0, parts.pop())
    shown = "/".join(kept)
    return shown if len(shown) <= limit else ELLIPSIS + shown[-(limit - 1) :]


def _is_path(word: str) -> bool:
    return "/" in word and not word.startswith(("-", "http://", "https://"))


def _without_noise(words: list[str]) -> list[str]:
    """Redirections and a trailing ``| tail -n 20``: how the output was trimmed, not what ran."""
    out = [word for word in words if word not in _NOISE]
    for at in range(len(out) - 1, -1, -1):
        if out[at] == "|" and at + 1 < len(out) and out[at + 1] in _PAGER:
            tail = out[at + 2 :]
            if all(w.startswith("-") or w.isdigit() for w in tail):
                out = out[:at]
    return out


def cut_command(command: str, limit: int = CALL_CHARS) -> str:
    """A command cut to ``limit``: the verb of each step and its distinctive arguments first."""
    flat = collapse_whitespace(command).strip()
    if len(flat) <= limit:
        return flat
    words = _without_noise(flat.split(" "))
    words = [short_path(w, 30) if _is_path(w) and len(w) > 30 else w for w in words]
    if len(" ".join(words)) <= limit:
        return " ".join(words)
    rank: list[int] = []
    step_start = True
    verb_words = 0
    for word in words:
        if word in _SEPARATORS:
            rank.append(1)
            step_start, verb_words = True, 0
            continue
        if step_start or (verb_words and verb_words < 3 and not word.startswith("-") and not _is_path(word)):
            # The verb: the program and its subcommands (``npm run build``, ``git commit``).
            rank.append(0)
            verb_words += 1
            step_start = False
            continue
        verb_words = 0
        rank.append(3 if word.startswith("-") else 2)
    keep = [False] * len(words)
    room = limit
    for level in range(4):
        # Arguments longest first: a name (a module, a test, a file) tells calls apart more than
        # the short words around it (``-m "fix the … rules"`` keeps the name, not "the").
        order = sorted(range(len(words)), key=lambda at: -len(words[at])) if level == 2 else range(len(words))
        for at in order:
            word = words[at]
            if rank[at] == level and not keep[at]:
                cost = len(word) + 1
                if cost <= room:
                    keep[at] = True
                    room -= cost
    if not any(keep):
        return cut_words(flat, limit)
    shown: list[str] = []
    for at, word in enumerate(words):
        if keep[at]:
            shown.append(word)
        elif not shown or shown[-1] != ELLIPSIS:
            shown.append(ELLIPSIS)
    while shown and shown[-1] in _SEPARATORS:
        shown.pop()
    return " ".join(shown)


_FILLED = re.compile(r"^[^\S\n]*\S.*$", re.MULTILINE)
_ISSUE_LINES = re.compile(r"^.*?(?:" + ISSUE_LINE.pattern + r").*$", re.IGNORECASE | re.MULTILINE)
"""The whole lines holding a match: scanned by the regex engine, not line by line in Python."""
TAIL_LINES = 12
"""Lines read from the end of an output (status, Pi's note, a command's summary are there)."""


def error_line(text: str) -> str | None:
    """The line that says what went wrong: an error, failure or exception line; else any line
    naming a problem; never a quoted code frame or stack frame. One scan of the text each, in
    C: an output can be thousands of lines.
    """
    at = 0
    while (found := _ERROR_LINE.search(text, at)) is not None:
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.end())
        line = text[start : len(text) if end < 0 else end]
        if _CODE_FRAME.search(line) is None:
            return line
        if end < 0:
            break
        at = end + 1
    for found in _ISSUE_LINES.finditer(text):
        line = found.group(0)
        if _CODE_FRAME.search(line) is None and _STATUS.match(line.strip()) is None:
            return line
    return None


def _summary_line(lines: list[str]) -> str:
    """A successful command's summary: the last line of its last few that says how it went
    (after vitest's ``Tests 12 passed`` come the start time and duration), else its last line.
    """
    for line in reversed(lines[-SUMMARY_LOOKBACK:]):
        if _SUMMARY_LINE.search(line):
            return line
    return lines[-1]


LINE_SPANNING_ANCHORS = ("-----BEGIN",)
"""The anchors of the one redaction rule whose secret can span lines (``private-key``; every
other rule's match, and what its guard looks at, lies within one line: ``redact/rules.py``)."""
SHOWN_WHOLE_BELOW = 4096
"""An output shorter than this is redacted whole: cutting it saves nothing worth the care."""


def scrub_shown(output: str) -> str:
    """``scrub(output)`` as ``outcome`` reads it, redacting only the lines it can show.

    A successful event's outcome reads the output's line count, its first filled line and its
    last ``TAIL_LINES`` lines; a 40 MB build log costs the redaction of those, not of 40 MB.
    What comes back is those lines, each redacted whole (a secret that a later cut of the line
    splits is replaced before anything cuts it), with every line between them emptied: the
    same count, the same lines, so the same outcome as of the whole text redacted. Redaction
    rules see a whole line with its neighbours' line breaks, all any rule but the private key's
    looks at; an output holding a private key's anchor, or a short one, is redacted whole.
    """
    if len(output) < SHOWN_WHOLE_BELOW or any(anchor in output for anchor in LINE_SPANNING_ANCHORS):
        return scrub(output)
    head = _FILLED.search(output)
    head_end = len(output) if head is None else output.find("\n", head.end())
    kept = output.rstrip()
    tail_start = len(kept)
    for _ in range(TAIL_LINES):  # the start of the last TAIL_LINES lines, as outcome splits them
        tail_start = kept.rfind("\n", 0, tail_start)
        if tail_start < 0:
            break
    if head_end < 0 or tail_start <= head_end:
        return scrub(output)
    # head_end is the head line's break, tail_start the break before the tail: both kept.
    middle = output.count("\n", head_end + 1, tail_start)
    return scrub(output[: head_end + 1]) + "\n" * middle + scrub(output[tail_start:])


def issue_count(text: str) -> int:
    return sum(1 for line in _ISSUE_LINES.findall(text) if _CODE_FRAME.search(line) is None)


@dataclass(frozen=True)
class Outcome:
    mark: str
    """``✗`` for a failure, ``✓`` for a success with nothing more to say, else ``→``."""
    text: str
    """What it said (empty for ``✓``)."""
    size: str
    """How much is behind it (``7 lines, 2 issues``; empty for ``✓``)."""
    whole: bool = False
    """The text is all the output said: the full line needs no size."""


def _lines_word(count: int) -> str:
    return f"{count} line" if count == 1 else f"{count} lines"


def outcome(
    tool: str, output: str, failed: bool, note: str = "", *, command: bool = False, place: Place
) -> Outcome:
    """The outcome of one tool event.

    ``output`` is the result's text as recall numbers its lines; ``note`` is a status known
    apart from it (a user's ``!command``: ``exit 2``). A failure shows its error line (else its
    first line) after the exit status; a command that succeeded its last line (where test
    runners, builds and git put their summary); an edit or write that succeeded ``✓``; any
    other success its first line. Issues are counted for failures only.
    """
    count = output.count("\n") + (0 if output.endswith("\n") else 1)
    # Only the ends of an output are read line by line: its first filled line, and its last
    # few, where Pi's status line and truncation note and a command's summary are.
    tail = [line for line in output.rstrip().rsplit("\n", TAIL_LINES)[-TAIL_LINES:] if line.strip()]
    said = [line for line in tail if _PI_NOTE.match(line.strip()) is None]
    if command:
        kept = []
        for line in said:
            status = _STATUS.match(line.strip())
            if status is None:
                kept.append(line)
            elif status["code"] is not None:
                note = f"exit {status['code']}"
            elif status["aborted"] is not None:
                note = "aborted"
            elif status["timeout"] is not None:
                note = f"timed out after {status['timeout']} s"
            else:
                note = "no exit code"
        said = kept
    head = _FILLED.search(output)
    opening = head.group(0) if head is not None and said else (said[0] if said else "")
    lines = head is not None
    if not failed and tool in ("edit", "write"):
        return Outcome(OK, "", "")  # Pi's "Successfully replaced 1 block(s) in <path>." says no more
    if not failed and command and (not said or (len(said) == 1 and said[0].strip() == NO_OUTPUT)):
        return Outcome(OK, "", "")
    if failed:
        first = (error_line(output) or opening) if said else ""
        issues = issue_count(output)
    else:
        first = (_summary_line(said) if command else opening) if said else ""
        issues = 0
    first = cut_words(place.relative(first), ERROR_CHARS if failed else OUTCOME_CHARS)
    text = f"{note}: {first}" if note and first else note or first
    whole = (
        count <= 1
        and not note
        and (not said or collapse_whitespace(place.relative(said[0])).strip() == first)
    )
    size = _lines_word(count) if lines else "empty"
    if issues:
        size += ", 1 issue" if issues == 1 else f", {issues} issues"
    return Outcome(FAILED if failed else "→", text, size, whole)
