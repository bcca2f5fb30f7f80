"""``pbot-watch pi serve``: the Pi extension's one long-lived child, answering JSON lines.

Pi starts this once per process (lazily, on the first need) and keeps it, so a tool call pays
no interpreter start and no imports. The reader thread parses each line and answers the quick
methods (``hello``, ``footer``, ``session``) at once; queries (``tool``, ``cues``) go to one
worker thread, one at a time, as the MCP server runs them: SQLite serialises writers anyway, and
refreshes of the index must not race. Between requests the worker prepares the sessions Pi
named (``session``, or a request about them): their cue ledgers are read and their raw memory
is built (``ahead.py``), a piece at a time, so the first cues and the first pinned search of a
marathon session do not each wait for a read of the whole file. Where the service read the
session, both are on disk already: the ledger it saved (``memory/cue_listener.py``) is loaded
and only what was appended after it is read. A bad line is answered with a ``protocol`` error and the child goes
on; it stops when Pi closes its stdin (Pi quit, or was killed).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import BaseModel, ValidationError

from pbot_watch import __version__
from pbot_watch.archive.stamp import FileStamp, file_stamp
from pbot_watch.config import Settings
from pbot_watch.display import for_person, language
from pbot_watch.errors import bounded, failure_kind
from pbot_watch.log import get_logger
from pbot_watch.pi.jsonline import Malformed, loads_json
from pbot_watch.pi_bridge.footer import footer_text
from pbot_watch.pi_bridge.protocol import (
    CuesParams,
    CuesReply,
    ErrorBody,
    FooterParams,
    FooterReply,
    Hello,
    NoParams,
    Request,
    Scope,
    SessionParams,
    SessionReply,
    ToolParams,
    ToolReply,
    reply_line,
)
from pbot_watch.service.status import read_status
from pbot_watch.service.status_file import assess, status_path

if TYPE_CHECKING:
    from pbot_watch.memory.cue_follow import FollowedCues
    from pbot_watch.memory.query import MemoryScope
    from pbot_watch.pi_bridge.ahead import MemoryAhead
    from pbot_watch.tools.catch_up import RecordCatchUp

log = get_logger(__name__)

CUE_CACHE_SIZE = 8
"""Cue blocks kept (a few sessions' branches): a repeated question is answered without re-reading."""

IDLE_FOLLOW_S = 1.0
"""How often an idle child looks whether the session files it follows grew (a ``stat`` each)."""
MEMORY_TOOLS = frozenset({"search_memory", "recall_memory"})
"""The tools that read the pinned session's raw memory (built ahead, ``ahead.py``)."""
STILL_BUILDING = (
    "\nNote: this session's raw memory is still being built ({mb} MB of its file not read yet): a "
    "handle or entry of that part is unknown until then; try again in a minute."
)

RequestId = int | str | None


@dataclass(frozen=True)
class Method:
    params: type[BaseModel]
    run: Callable[[Any], BaseModel]
    quick: bool = False
    """Answered on the reader thread, even while a query runs on the worker."""


class Child:
    """The methods, bound to the settings the child was started with."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._cues: dict[tuple[str, FileStamp | None, str | None, int], CuesReply] = {}
        self._records: RecordCatchUp | None = None
        self._followed: FollowedCues | None = None
        self._ahead: MemoryAhead | None = None
        self._announced: deque[Path] = deque()
        """Session files Pi named (``session``, on the reader thread), for the worker to prepare."""
        self._cleaned = False

    def methods(self) -> dict[str, Method]:
        return {
            "hello": Method(NoParams, self.hello, quick=True),
            "footer": Method(FooterParams, self.footer, quick=True),
            "session": Method(SessionParams, self.session, quick=True),
            "tool": Method(ToolParams, self.tool),
            "cues": Method(CuesParams, self.cues),
        }

    def hello(self, _params: NoParams) -> Hello:
        return Hello(
            version=__version__, pid=os.getpid(), statusFile=str(status_path(self.settings.state_dir))
        )

    def footer(self, params: FooterParams) -> FooterReply:
        status = read_status(self.settings.state_dir)
        state, _detail = assess(self.settings.state_dir, status)
        return FooterReply(text=footer_text(state, status, installed=params.installed, running=__version__))

    def session(self, params: SessionParams) -> SessionReply:
        """Pi works in this session: prepare its cues and raw memory between requests (on the worker)."""
        if params.sessionFile is None:
            return SessionReply(cues=False, memory=False)
        self._announced.append(Path(params.sessionFile))
        return SessionReply(cues=self.settings.cues.enabled, memory=True)

    def cues(self, params: CuesParams) -> CuesReply:
        """The branch's cue block, from the file's ledger (read up to date first; cached while the file is unchanged)."""
        from pbot_watch.memory.cues import DEFAULT_CONTEXT_WINDOW, ledger_cues  # noqa: PLC0415

        path = Path(params.sessionFile)
        window = params.contextWindow or DEFAULT_CONTEXT_WINDOW
        if not self.settings.cues.enabled:
            return CuesReply(block=None, batch=0, compactionId=None)  # [cues] enabled = false
        key = (str(path), file_stamp(path), params.leaf, window)
        cached = self._cues.get(key)
        if cached is not None:
            return cached
        state = ledger_cues(
            self.followed().ledger(path),
            leaf=params.leaf,
            context_window=window,
            tz=_local_zone(),
            max_tokens=self.settings.cues.cap(window),
        )
        reply = CuesReply(block=state.text or None, batch=state.batch, compactionId=state.compaction_id)
        if key[1] is not None:
            while len(self._cues) >= CUE_CACHE_SIZE:
                del self._cues[next(iter(self._cues))]
            self._cues[key] = reply
        return reply

    def followed(self) -> FollowedCues:
        """The cue ledgers of the session files Pi asked about (made on first need: the imports)."""
        if self._followed is None:
            from pbot_watch.memory.cue_follow import FollowedCues, ledger_store  # noqa: PLC0415

            self._followed = FollowedCues(ledger_store(self.settings.state_dir))
        return self._followed

    def ahead(self) -> MemoryAhead:
        """The sessions whose raw memory is built between requests (made on first need: the imports)."""
        if self._ahead is None:
            from pbot_watch.pi_bridge.ahead import MemoryAhead  # noqa: PLC0415

            self._ahead = MemoryAhead(self.settings)
        return self._ahead

    def idle(self) -> bool:
        """Between requests: prepare the sessions Pi named a piece; whether more is left.

        First what the followed files' cue ledgers have not read (so the cues of the next
        compaction, and of a restart of Pi on a marathon session, are computed from a ledger
        already current), then the raw memory they lack (``ahead.py``). Never raises (an idle
        step must not stop the worker).
        """
        try:
            if not self._cleaned:  # once per child: the saved ledgers of session files that are gone
                from pbot_watch.memory.cue_follow import clean_ledgers, ledger_store  # noqa: PLC0415

                self._cleaned = True
                clean_ledgers(ledger_store(self.settings.state_dir))
            while self._announced:
                path = self._announced.popleft()
                if self.settings.cues.enabled:
                    self.followed().watch(path)
                self.ahead().watch(path)
            if self._followed is not None and self._followed.follow():
                return True
            return self._ahead is not None and self._ahead.step()
        except Exception:  # a bug here must not cost the child its requests
            log.exception("pi_follow_failed")
            return False

    def tool(self, params: ToolParams) -> ToolReply:
        from pbot_watch.tools.catch_up import RecordCatchUp  # noqa: PLC0415 - the first call pays the imports
        from pbot_watch.tools.registry import call  # noqa: PLC0415

        if self._records is None:
            self._records = RecordCatchUp(self.settings)  # kept: it reads only what was appended since
        scope = memory_scope(params.scope)
        building: int | None = None
        if scope is not None and scope.session_file is not None:
            if self.settings.cues.enabled:
                self.followed().watch(scope.session_file)  # its cues will be asked for: read it while idle
            if params.name in MEMORY_TOOLS and self.ahead().before_query(scope.session_file):
                # Still being built: answer from what is (the result says the session is not all
                # searched); the branch is the built part's, the current entry not read yet.
                building = self.ahead().left(scope.session_file)
                scope = replace(scope, leaf=None, read_at_most=0)
        answer = call(params.name, params.arguments, self.settings, scope=scope, records=self._records)
        failure = None if answer.failure is None else answer.failure.value
        text = answer.text
        if building is not None and failure == "arguments":
            # A cue's handle names a source of the part not built yet: not the model's mistake.
            text += STILL_BUILDING.format(mb=max(1, round(building / 1e6)))
        # Pi shows the structured result to the person (/history, the tool's rendering): labels as they read them.
        query = params.arguments.get("query") if isinstance(params.arguments, dict) else None
        structured = for_person(answer.structured, language(self.settings.display_labels), str(query or ""))
        return ToolReply(text=text, structured=structured, failure=failure)  # type: ignore[arg-type]


def memory_scope(scope: Scope | None) -> MemoryScope | None:
    """The calling session's branch, as the memory tools pin it; ``None`` when the caller named none."""
    if scope is None or (scope.sessionFile is None and scope.sessionId is None):
        return None
    from pbot_watch.memory.query import MemoryScope  # noqa: PLC0415

    return MemoryScope(
        session_file=Path(scope.sessionFile) if scope.sessionFile else None,
        session_id=scope.sessionId,
        leaf=scope.leaf,
    )


def _local_zone() -> tzinfo:
    """The zone cue lines show times in: the child's, which is Pi's (it inherits TZ)."""
    return datetime.now().astimezone().tzinfo or UTC


class PiExtensionServer:
    """Serves the Pi extension: reads requests from ``inp`` until end of file, one reply each to ``out``."""

    def __init__(self, child: Child, out: BinaryIO) -> None:
        self.methods = child.methods()
        self.idle = child.idle
        self.out = out
        self._write_lock = threading.Lock()
        self._work: queue.Queue[tuple[RequestId, Method, BaseModel] | None] = queue.Queue()

    def serve(self, inp: BinaryIO) -> None:
        worker = threading.Thread(target=self._worker, name="pi-serve-worker", daemon=True)
        worker.start()
        log.info("pi_child_started", version=__version__, pid=os.getpid())
        try:
            for raw in iter(inp.readline, b""):
                if raw.strip():
                    self.dispatch(raw)
        finally:
            self._work.put(None)
            worker.join()
            log.info("pi_child_stopped")

    def dispatch(self, raw: bytes) -> None:
        try:
            data = loads_json(raw)
        except Malformed as error:
            self._error(None, "protocol", f"not a JSON line: {error}")
            return
        request_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(request_id, int | str):
            request_id = None
        try:
            request = Request.model_validate(data)
        except ValidationError as error:
            self._error(request_id, "protocol", f"not a request ({_first(error)})")
            return
        method = self.methods.get(request.method)
        if method is None:
            known = ", ".join(sorted(self.methods))
            self._error(request.id, "protocol", f"unknown method {request.method!r} (known: {known})")
            return
        try:
            params = method.params.model_validate(request.params)
        except ValidationError as error:
            self._error(request.id, "protocol", f"bad params for {request.method}: {_first(error)}")
            return
        if method.quick:
            self._run(request.id, method, params)
        else:
            self._work.put((request.id, method, params))

    def _worker(self) -> None:
        more = False
        while True:
            try:
                item = self._work.get(timeout=0 if more else IDLE_FOLLOW_S)
            except queue.Empty:
                more = self.idle()  # no request waiting: follow the session files a piece
                continue
            if item is None:
                return
            self._run(*item)
            more = True  # the request may have named a file to follow

    def _run(self, request_id: RequestId, method: Method, params: BaseModel) -> None:
        started = time.monotonic()
        try:
            result = method.run(params)
        except Exception as error:  # every failure is an answer; whose it is: pbot_watch.errors
            kind = failure_kind(error)
            if kind == "arguments":  # the request names something that is not there (a leaf, a session)
                self._error(request_id, "arguments", str(error))
                return
            if kind == "internal":  # a bug: the caller hears "unavailable", the log has the traceback
                log.exception("pi_request_failed", method=method.run.__name__)
            else:
                log.warning("pi_request_unavailable", method=method.run.__name__, error=str(error))
            self._error(
                request_id, "unavailable", bounded(f"pbot-watch failed: {type(error).__name__}: {error}")
            )
            return
        self._write(reply_line(request_id, result=result))
        log.debug("pi_request", method=method.run.__name__, ms=round((time.monotonic() - started) * 1000, 1))

    def _error(self, request_id: RequestId, kind: str, message: str) -> None:
        self._write(reply_line(request_id, error=ErrorBody(kind=kind, message=message)))  # type: ignore[arg-type]

    def _write(self, line: bytes) -> None:
        with self._write_lock:
            self.out.write(line)
            self.out.flush()


def _first(error: ValidationError) -> str:
    item = error.errors()[0]
    where = ".".join(str(part) for part in item["loc"])
    return f"{where}: {item['msg']}" if where else item["msg"]


def serve(settings: Settings, inp: BinaryIO, out: BinaryIO) -> None:
    PiExtensionServer(Child(settings), out).serve(inp)
