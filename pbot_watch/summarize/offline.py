"""A summarizer that needs no model: deterministic extraction, the default when none is configured.

It cannot understand, so it does not pretend to: it lists what the input plainly contains.
For a group of exchanges: what was asked, what was touched (paths, commands), the errors seen
and how the last exchange ended. For higher levels: the time span, the topics of the parts,
the names and paths, and the most frequent keywords. It writes in the input's main language
(Chinese or English labels), so a search in either language finds it. Its summaries carry
``"summarizer": "offline/1"`` on the node and are replaced when a real model is configured.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

from pbot_watch.redact.policy import scrub
from pbot_watch.shorten import shorten
from pbot_watch.summarize.base import Cancelled, Summary

OFFLINE_ID = "offline/1"
OFFLINE_VERSION = "extract-1"

USER_LABEL = "用户：\n"
ASSISTANT_LABEL = "助手：\n"

MAX_ITEMS = 8
MAX_TOPIC_UNITS = 120
MAX_OUTCOME_UNITS = 240
MAX_ERROR_UNITS = 160

_HEADER = re.compile(r"^\[([^\]\n]*?) — ([^\]\n]*?)(；未完成)?\]$", re.MULTILINE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_LATIN = re.compile(r"[A-Za-z]")
_PATH = re.compile(
    r"(?<![\w/.~-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.-])[\w-]+\.(?:py|ts|tsx|js|mjs|json|jsonl|md|toml|"
    r"yaml|yml|txt|sh|rs|go|java|c|h|cpp|css|html|sql|lock|cfg|ini|csv)\b"
)
_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_SHELL = re.compile(r"^\s*\$ (.{2,120})$", re.MULTILINE)
_ERROR = re.compile(
    r"(?i)\b(?:error|exception|traceback|failed|failure|fatal|panic|denied|not found|timeout)\b|错误|失败|报错|异常|超时"
)
# A shell command in backticks: a lower-case program name, then arguments without code punctuation.
_COMMAND = re.compile(r"^(?:sudo )?[a-z][\w.-]* [^(){};=<>\"]+$")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{2,}")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n")
_LABELS = re.compile(r"用户：|助手：|；未完成")

_STOPWORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "are",
        "was",
        "were",
        "you",
        "your",
        "have",
        "has",
        "had",
        "not",
        "but",
        "can",
        "will",
        "would",
        "should",
        "could",
        "into",
        "about",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "why",
        "then",
        "than",
        "there",
        "their",
        "them",
        "they",
        "she",
        "his",
        "her",
        "its",
        "our",
        "out",
        "all",
        "any",
        "some",
        "also",
        "just",
        "like",
        "use",
        "used",
        "using",
        "make",
        "made",
        "get",
        "got",
        "let",
        "lets",
        "please",
        "thanks",
        "thank",
        "yes",
        "okay",
        "sure",
        "one",
        "two",
        "now",
        "new",
        "see",
        "here",
        "more",
        "most",
        "very",
        "much",
        "such",
        "only",
        "each",
        "other",
        "been",
        "being",
        "does",
        "did",
        "done",
        "doing",
        "asked",
        "topics",
        "names",
        "keywords",
        "outcome",
        "errors",
        "period",
        "files",
        "commands",
        "unfinished",
        "final",
        "answer",
        "parts",
        "paths",
    ]
)


@dataclass(frozen=True, slots=True)
class Part:
    """One child of the node: its span, whether it finished, and its text."""

    start: str
    end: str
    completed: bool
    text: str


@dataclass(frozen=True, slots=True)
class Labels:
    asked: str
    files: str
    commands: str
    errors: str
    outcome: str
    unfinished: str
    period: str
    topics: str
    names: str
    keywords: str
    separator: str
    colon: str
    unknown_outcome: str
    not_finished: str


ENGLISH = Labels(
    "Asked",
    "Files",
    "Commands",
    "Errors",
    "Outcome",
    "Unfinished",
    "Period",
    "Topics",
    "Names and paths",
    "Keywords",
    "; ",
    ": ",
    "no final answer",
    "{n} of {total} parts had no final answer",
)
CHINESE = Labels(
    "提问",
    "文件",
    "命令",
    "错误",
    "结果",
    "未完成",
    "时间",
    "话题",
    "名称与路径",
    "关键词",
    "；",
    "：",
    "没有最终答复",
    "{total} 段中有 {n} 段没有最终答复",
)


def parse_parts(text: str) -> list[Part]:
    """Split a node input (see ``base.node_input``) back into its children."""
    headers = list(_HEADER.finditer(text))
    if not headers:
        return [Part("", "", True, text)]
    parts = []
    for index, match in enumerate(headers):
        stop = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[match.end() + 1 : stop].removesuffix("\n\n")
        parts.append(Part(match.group(1), match.group(2), match.group(3) is None, body))
    return parts


def main_language(text: str) -> Labels:
    """Chinese when CJK characters outnumber a third of the Latin letters (a CJK character says more)."""
    bare = _LABELS.sub("", text)
    cjk = len(_CJK.findall(bare))
    latin = len(_LATIN.findall(bare))
    return CHINESE if cjk * 3 >= latin and cjk > 0 else ENGLISH


def _shorten(text: str, limit: int) -> str:
    """On one line as Python splits words (these summaries always have), cut by the one rule."""
    return shorten(" ".join(text.split()), limit, trim_cut=True)


def _first_sentence(text: str, limit: int) -> str:
    for piece in _SENTENCE_END.split(text.strip()):
        if piece.strip():
            return _shorten(piece, limit)
    return ""


def _outcome(answer: str) -> str:
    """The final answer, whole when it fits; else its first and its last sentences.

    An answer says what it did and then the result ("I ran the suite. 3 tests fail in x.py"):
    its first sentence alone would stop before the result.
    """
    flat = " ".join(answer.split())
    if len(flat) <= MAX_OUTCOME_UNITS:
        return flat
    sentences = [piece for piece in _SENTENCE_END.split(answer.strip()) if piece.strip()]
    first = _shorten(sentences[0], MAX_OUTCOME_UNITS // 2) if sentences else ""
    last = _shorten(sentences[-1], MAX_OUTCOME_UNITS // 2) if len(sentences) > 1 else ""
    return f"{first} … {last}" if last else _shorten(flat, MAX_OUTCOME_UNITS)


def _split_exchange(text: str) -> tuple[str, str | None]:
    """(what the person wrote, the answer or ``None``) of an exchange's text."""
    if not text.startswith(USER_LABEL):
        return text, None
    marker = "\n\n" + ASSISTANT_LABEL
    position = text.rfind(marker)
    if position < 0:
        return text.removeprefix(USER_LABEL), None
    question = text[len(USER_LABEL) : position].replace("\n\n" + USER_LABEL, "\n")
    return question, text[position + len(marker) :]


def _unique(items: list[str], limit: int = MAX_ITEMS) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        cleaned = item.strip().strip(".,;:)('\"")
        if cleaned and cleaned not in seen:
            seen[cleaned] = None
    return list(seen)[:limit]


def _paths(text: str) -> list[str]:
    return [m.group(0) for m in _PATH.finditer(text) if not m.group(0).startswith(("http:", "https:"))]


def _commands(text: str) -> list[str]:
    found = [m.group(1) for m in _SHELL.finditer(text)]
    found += [m.group(1) for m in _BACKTICK.finditer(text) if _COMMAND.match(m.group(1))]
    return found


def _identifiers(text: str) -> list[str]:
    return [m.group(1) for m in _BACKTICK.finditer(text) if " " not in m.group(1)]


def _errors(text: str) -> list[str]:
    return [_shorten(line, MAX_ERROR_UNITS) for line in text.splitlines() if _ERROR.search(line)]


def _keywords(text: str, exclude: set[str], limit: int = MAX_ITEMS) -> list[str]:
    counts: Counter[str] = Counter()
    bare = _LABELS.sub(" ", text)
    for word in _WORD.findall(bare):
        lower = word.lower().strip(".-_")
        if lower not in _STOPWORDS and not any(lower in name for name in exclude) and len(lower) > 2:
            counts[lower] += 1
    # CJK text has no spaces: count two-character runs, the unit a search also uses.
    for run in re.findall(r"[\u4e00-\u9fff]{2,}", bare):
        for i in range(len(run) - 1):
            counts[run[i : i + 2]] += 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [word for word, count in ranked if count > 1][:limit]


def _line(labels: Labels, label: str, items: list[str], separator: str | None = None) -> str | None:
    return f"{label}{labels.colon}{(separator or labels.separator).join(items)}" if items else None


def summarize_exchanges(parts: list[Part], labels: Labels) -> str:
    """A group of exchanges: asked, files, commands, errors, outcome."""
    questions: list[str] = []
    answers: list[str] = []
    for part in parts:
        question, answer = _split_exchange(part.text)
        questions.append(_first_sentence(question, MAX_TOPIC_UNITS))
        if answer is not None:
            answers.append(answer)
    everything = "\n".join(part.text for part in parts)
    last = parts[-1]
    _, last_answer = _split_exchange(last.text)
    outcome = _outcome(last_answer) if last.completed and last_answer else labels.unknown_outcome
    unfinished = sum(1 for part in parts if not part.completed)
    lines = [
        _line(labels, labels.asked, _unique(questions)),
        _line(labels, labels.files, _unique(_paths(everything))),
        _line(labels, labels.commands, _unique(_commands(everything))),
        _line(labels, labels.errors, _unique(_errors("\n".join(answers)), 4)),
        f"{labels.outcome}{labels.colon}{outcome}",
    ]
    if unfinished:
        lines.append(
            f"{labels.unfinished}{labels.colon}{labels.not_finished.format(n=unfinished, total=len(parts))}"
        )
    return "\n".join(line for line in lines if line)


_TOPIC_LINE = re.compile(r"^(?:Asked: |提问：|Topics: |话题：)(.+)$", re.MULTILINE)
_LABEL_LINE = re.compile(r"^(?:Period: |时间：)")


def _topic_of(text: str) -> str:
    """A part's topic: the first ``Asked``/``Topics`` line of an offline summary, else its first line."""
    found = _TOPIC_LINE.search(text)
    if found:
        return found.group(1)
    for line in text.splitlines():
        if line.strip() and not _LABEL_LINE.match(line):
            return line
    return text


def summarize_summaries(parts: list[Part], labels: Labels) -> str:
    """Higher levels: span, the parts' topics, names and paths, and keywords."""
    topics: list[str] = []
    for part in parts:
        # A child's topic line lists several topics; split it so repeats across children merge.
        topics.extend(_first_sentence(t, MAX_TOPIC_UNITS) for t in re.split(r"; |；", _topic_of(part.text)))
    everything = "\n".join(part.text for part in parts)
    names = _unique(_paths(everything) + _identifiers(everything), MAX_ITEMS * 2)
    exclude = {name.lower() for name in names}
    starts = [p.start for p in parts if p.start]
    ends = [p.end for p in parts if p.end]
    unfinished = sum(1 for part in parts if not part.completed)
    lines = [
        f"{labels.period}{labels.colon}{min(starts)} — {max(ends)}" if starts and ends else None,
        _line(labels, labels.topics, _unique(topics)),
        _line(labels, labels.names, names),
        _line(labels, labels.keywords, _keywords(everything, exclude), ", " if labels is ENGLISH else "、"),
    ]
    if unfinished:
        lines.append(
            f"{labels.unfinished}{labels.colon}{labels.not_finished.format(n=unfinished, total=len(parts))}"
        )
    return "\n".join(line for line in lines if line)


def offline_summary(text: str) -> str:
    """The summary of one node input; never empty for a non-empty input."""
    parts = parse_parts(text)
    labels = main_language(text)
    exchanges = any(part.text.startswith(USER_LABEL) for part in parts)
    body = summarize_exchanges(parts, labels) if exchanges else summarize_summaries(parts, labels)
    return body.strip() or _shorten(text, MAX_OUTCOME_UNITS) or "(empty)"


class OfflineSummarizer:
    """The ``Summarizer`` used when no model is configured; free, instant and deterministic."""

    id = OFFLINE_ID
    prompt_version = OFFLINE_VERSION
    offline = True
    model = OFFLINE_ID

    def summarize(self, text: str, cancel: threading.Event) -> Summary:
        if cancel.is_set():
            raise Cancelled
        return Summary(text=offline_summary(scrub(text)), model=OFFLINE_ID)
