"""The summary cache, daily usage and per-node failures, in SQLite in the state folder.

``summaries.db`` has its own numbered migrations (``m001_...``, ``pbot_watch.sqlite.migrate``).
It is derived state, but not free to rebuild: the cache holds what was paid for, so it is
written with full durability. Several threads and processes may open it (the service's worker,
``pbot-watch status``, ``pbot-watch summarize``); ``pbot_watch.sqlite`` gives it WAL and the
busy timeout they need.

Days are local calendar days: a person's "per day" limit resets at their midnight.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from pbot_watch.errors import PbotWatchError
from pbot_watch.redact.policy import scrub
from pbot_watch.sqlite import Migrations, connect, execute_script, is_corrupt, is_intact, migrate, set_aside
from pbot_watch.summarize.base import LimitReached, usage_cost, usage_count

log = structlog.get_logger("pbot_watch.summarize")

DB_NAME = "summaries.db"
BACKOFF_BASE_SECONDS = 60.0
BACKOFF_MAX_SECONDS = 6 * 3600.0


def m001_initial(db: sqlite3.Connection) -> None:
    execute_script(
        db,
        """
        CREATE TABLE cache (
            key TEXT PRIMARY KEY,          -- base.content_key(): sha256 of input + summarizer + prompt
            summarizer TEXT NOT NULL,
            model TEXT NOT NULL,
            text TEXT NOT NULL CHECK (text <> ''),
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE TABLE usage (
            day TEXT NOT NULL,             -- local date, YYYY-MM-DD
            model TEXT NOT NULL,
            calls INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            PRIMARY KEY (day, model)
        );
        CREATE TABLE failures (
            node TEXT PRIMARY KEY,         -- node id (record id : level : last entry id)
            key TEXT NOT NULL,             -- the input that failed (another input starts afresh)
            errors INTEGER NOT NULL,
            last_error TEXT NOT NULL,
            failed_at REAL NOT NULL,
            retry_at REAL NOT NULL
        );
        """,
    )


def m002_status(db: sqlite3.Connection) -> None:
    # The last queue scan, so `pbot-watch status` can show pending counts without reading records.
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")


MIGRATIONS: Migrations = [
    ("m001_initial", m001_initial),
    ("m002_status", m002_status),
]


def today(now: float | None = None) -> str:
    return dt.datetime.fromtimestamp(time.time() if now is None else now).date().isoformat()  # noqa: DTZ006 - local day


@dataclass(frozen=True, slots=True)
class CachedSummary:
    text: str
    summarizer: str
    model: str


@dataclass(frozen=True, slots=True)
class DayUsage:
    day: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Failure:
    node: str
    key: str
    errors: int
    last_error: str
    retry_at: float


@dataclass(frozen=True, slots=True)
class Limits:
    """Ceilings on model use; 0 calls per day turns the model off."""

    calls_per_day: int = 500
    tokens_per_day: int = 2_000_000
    calls_per_idle: int = 50


def backoff_seconds(errors: int, base: float = BACKOFF_BASE_SECONDS) -> float:
    """1, 2, 4 ... times ``base`` after each consecutive failure, at most six hours."""
    return float(min(BACKOFF_MAX_SECONDS, base * 2 ** max(0, errors - 1)))


class _Damaged(PbotWatchError):
    """A store that opens but whose pages are not all readable."""


class SummaryStore:
    """One connection to ``summaries.db``; safe to share between threads of one process."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / DB_NAME
        self._lock = threading.Lock()
        self.warnings: list[str] = []
        """What opening found: a damaged file set aside."""
        try:
            self._db, self.applied = self._open()
        except (sqlite3.DatabaseError, _Damaged) as error:
            if isinstance(error, sqlite3.DatabaseError) and not is_corrupt(error):
                raise
            self._start_afresh(str(error))

    def _open(self) -> tuple[sqlite3.Connection, list[str]]:
        db = connect(self.path, "full", threads=True)
        try:
            applied = migrate(db, MIGRATIONS)
            intact = is_intact(db)
        except BaseException:
            db.close()
            raise
        if not intact:
            db.close()
            raise _Damaged("PRAGMA quick_check found damaged pages")
        return db, applied

    def _start_afresh(self, error: str) -> None:
        """A damaged store (garbage, a torn page): kept aside for a look, summaries are made again.

        The summarizer then pays again for what it needs; without this, the service and
        ``summarize`` could do nothing until a person found and removed the file.
        """
        aside = set_aside(self.path)
        message = (
            f"the summary store {self.path} was unreadable ({error}); it is kept as {aside.name} and "
            "started afresh: summaries are made again as needed"
        )
        self.warnings.append(message)
        log.warning("summary_store_started_afresh", path=str(self.path), error=error, kept_as=aside.name)
        self._db, self.applied = self._open()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- cache ----------------------------------------------------------------------------
    def cached(self, key: str) -> CachedSummary | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, summarizer, model FROM cache WHERE key = ?", (key,)
            ).fetchone()
        if not row:
            return None
        text, summarizer, model = row
        # A summary paid for before redaction (or with it off) may quote a secret its input held.
        return CachedSummary(scrub(text), summarizer, model)

    def remember(
        self, key: str, summarizer: str, model: str, text: str, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        if not text.strip():
            raise ValueError("an empty summary is never cached")
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO cache VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, summarizer, model, text, input_tokens, output_tokens, time.time()),
            )

    def cache_size(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM cache").fetchone()[0])

    # ---- usage ----------------------------------------------------------------------------
    def add_usage(
        self, model: str, input_tokens: int, output_tokens: int, cost_usd: float, now: float | None = None
    ) -> None:
        with self._lock:
            self._db.execute(
                """INSERT INTO usage VALUES (?, ?, 1, ?, ?, ?)
                   ON CONFLICT (day, model) DO UPDATE SET calls = calls + 1,
                     input_tokens = input_tokens + excluded.input_tokens,
                     output_tokens = output_tokens + excluded.output_tokens,
                     cost_usd = cost_usd + excluded.cost_usd""",
                (today(now), model, input_tokens, output_tokens, cost_usd),
            )

    def usage(self, day: str | None = None) -> DayUsage:
        day = day or today()
        with self._lock:
            row = self._db.execute(
                "SELECT coalesce(sum(calls), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
                " coalesce(sum(cost_usd), 0) FROM usage WHERE day = ?",
                (day,),
            ).fetchone()
        return DayUsage(day, int(row[0]), int(row[1]), int(row[2]), float(row[3]))

    # ---- failures -------------------------------------------------------------------------
    def failure(self, node: str) -> Failure | None:
        with self._lock:
            row = self._db.execute(
                "SELECT node, key, errors, last_error, retry_at FROM failures WHERE node = ?", (node,)
            ).fetchone()
        return Failure(*row) if row else None

    def failures(self) -> list[Failure]:
        with self._lock:
            rows = self._db.execute(
                "SELECT node, key, errors, last_error, retry_at FROM failures ORDER BY failed_at DESC"
            ).fetchall()
        return [Failure(*row) for row in rows]

    def record_failure(
        self, node: str, key: str, error: str, now: float | None = None, base: float = BACKOFF_BASE_SECONDS
    ) -> Failure:
        """Count one more failure of ``node`` on input ``key`` and schedule its retry."""
        now = time.time() if now is None else now
        previous = self.failure(node)
        errors = previous.errors + 1 if previous is not None and previous.key == key else 1
        retry_at = now + backoff_seconds(errors, base)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?, ?, ?)",
                (node, key, errors, error, now, retry_at),
            )
        return Failure(node, key, errors, error, retry_at)

    def clear_failure(self, node: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM failures WHERE node = ?", (node,))

    # ---- the last scan --------------------------------------------------------------------
    def set_meta(self, name: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    def meta(self, name: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return str(row[0]) if row else None


class Meter:
    """Counts model calls against the limits; one per idle period (``calls_per_idle`` resets)."""

    def __init__(self, store: SummaryStore, limits: Limits, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock
        self.calls_this_period = 0

    def reason(self) -> str | None:
        """Why no call may be made now, or ``None``."""
        limits = self.limits
        if limits.calls_per_day <= 0:
            return "model calls are disabled (max_calls_per_day = 0)"
        used = self.store.usage(today(self.clock()))
        if used.calls >= limits.calls_per_day:
            return f"daily call limit reached ({used.calls}/{limits.calls_per_day} calls on {used.day})"
        if used.tokens >= limits.tokens_per_day:
            return f"daily token limit reached ({used.tokens}/{limits.tokens_per_day} tokens on {used.day})"
        if self.calls_this_period >= limits.calls_per_idle:
            return f"idle-period call limit reached ({self.calls_this_period}/{limits.calls_per_idle} calls)"
        return None

    def before_call(self) -> None:
        reason = self.reason()
        if reason is not None:
            raise LimitReached(reason)

    def after_call(self, model: str, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
        """Count one request, answered or not; the figures are clamped (see ``usage_count``)."""
        self.calls_this_period += 1
        self.store.add_usage(
            model, usage_count(input_tokens), usage_count(output_tokens), usage_cost(cost_usd), self.clock()
        )
