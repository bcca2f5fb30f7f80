r"""Logging: structlog, configured once per entry point.

Under a service manager (journald, launchd's log file) stdout is not a terminal and every event
is one JSON line with an ISO-8601 UTC timestamp and, for exceptions, a structured traceback
(``dict_tracebacks``), so the journal can be filtered with ``jq``. On a terminal the same events
are readable console lines. Session names, paths and summaries are often Chinese, Japanese or
Korean, so JSON is written with ``ensure_ascii=False``: ``"会话"``, never ``"\\u4f1a\\u8bdd"``.

Libraries (watchdog, the MCP SDK, httpx, litellm) log through the standard library; their
records go through the same renderer to the same stream, so one stream holds one format.

``pbot-watch mcp`` speaks its protocol on stdout and must log to stderr: pass ``stream``.

Every string an event carries is bounded (``errors.MESSAGE_CHARS``): a model's argument or
answer, or an error holding one, never makes a line of megabytes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from typing import Any, Literal, TextIO

import structlog
from structlog.processors import ExceptionRenderer
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from pbot_watch.config import Settings
from pbot_watch.errors import bounded_value
from pbot_watch.redact.policy import scrub_json

LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]

# Libraries that are chatty at INFO; they are kept at WARNING unless we log at DEBUG.
NOISY_LIBRARIES = ("httpx", "httpcore", "LiteLLM", "litellm", "watchdog", "mcp", "asyncio")


def resolve_format(log_format: LogFormat, stream: TextIO) -> Literal["json", "console"]:
    """``auto`` means console on a terminal and JSON everywhere else (pipes, journald, files)."""
    if log_format != "auto":
        return log_format
    try:
        return "console" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # closed or exotic streams
        return "json"


def _renderer(kind: Literal["json", "console"], stream: TextIO) -> Processor:
    if kind == "json":
        # structlog supplies ``default=`` itself (repr of odd values); we only keep CJK readable.
        return structlog.processors.JSONRenderer(serializer=json.dumps, ensure_ascii=False)
    colors = False
    with contextlib.suppress(AttributeError, ValueError):
        colors = stream.isatty()
    # No locals on screen either: they can hold API keys.
    return structlog.dev.ConsoleRenderer(
        colors=colors,
        exception_formatter=structlog.dev.RichTracebackFormatter(
            show_locals=False, color_system="truecolor" if colors else None
        ),
    )


class _NamedWriteLogger(structlog.WriteLogger):
    """A ``WriteLogger`` (one ``write`` per line, under a per-file lock) that knows its name."""

    def __init__(self, file: TextIO, name: str | None = None) -> None:
        super().__init__(file)
        self.name = name


class _WriteLoggerHandler(logging.Handler):
    """Standard-library records written through the same lock as structlog's, so lines never interleave."""

    def __init__(self, file: TextIO) -> None:
        super().__init__()
        self._out = structlog.WriteLogger(file)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._out.msg(self.format(record))
        except Exception:  # noqa: BLE001 - logging must never take the service down
            self.handleError(record)


def _add_logger_name(logger: WrappedLogger, _: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")
    name = record.name if record is not None else getattr(logger, "name", None)
    if name is not None:
        event_dict.setdefault("logger", name)
    return event_dict


def _drop_color_message(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # uvicorn-style libraries attach a duplicate, ANSI-coloured message; it only adds noise.
    event_dict.pop("color_message", None)
    return event_dict


def _redact(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # A log line is text leaving the process: an error message can quote a session's text.
    return {key: scrub_json(value) for key, value in event_dict.items()}


def _bound_values(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    # A value can be a model's whole argument or answer (a 3 MB id made a 3 MB line): each
    # string is cut to MESSAGE_CHARS, tracebacks' texts included, saying how much was left out.
    return {key: bounded_value(value) for key, value in event_dict.items()}


def configure_logging(
    settings: Settings | None = None,
    *,
    log_format: LogFormat | None = None,
    level: LogLevel | None = None,
    stream: TextIO | None = None,
) -> Literal["json", "console"]:
    """Set up structlog and the standard library's root logger; returns the format chosen.

    Explicit ``log_format``/``level`` win over ``settings``; with neither, ``auto``/``info``.
    Calling it again replaces the previous setup (tests and entry points may do so).
    """
    out = stream or sys.stdout
    fmt = resolve_format(log_format or (settings.log_format if settings else "auto"), out)
    level_name = (level or (settings.log_level if settings else "info")).upper()
    numeric = logging.getLevelNamesMapping()[level_name]

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_logger_name,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        _drop_color_message,
    ]
    if fmt == "json":
        # Console output renders exceptions itself (with rich/better-exceptions if present).
        # Frames without locals: locals can hold API keys and whole session texts.
        shared.append(ExceptionRenderer(ExceptionDictTransformer(show_locals=False)))
    shared.append(_redact)
    shared.append(_bound_values)
    renderer = _renderer(fmt, out)

    structlog.configure(
        processors=[*shared, structlog.processors.UnicodeDecoder(), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=lambda *args: _NamedWriteLogger(out, args[0] if args else None),
        # Not cached: tests use structlog.testing.capture_logs(), which only sees loggers
        # that look up their configuration when they are used.
        cache_logger_on_first_use=False,
    )

    handler = _WriteLoggerHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    library_level = numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING)
    for name in NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(library_level)
    return fmt


def get_logger(name: str | None = None, **initial: Any) -> Any:
    """A bound structlog logger; ``name`` becomes the ``logger`` key (the module, usually)."""
    # The name travels as the logger factory's argument, so the logger stays a lazy proxy that
    # follows later configure_logging() calls instead of freezing the configuration it saw first.
    return structlog.get_logger(name, **initial) if name is not None else structlog.get_logger(**initial)
