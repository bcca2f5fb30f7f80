"""Pi sessions of tool work for the cue tests and the docs example, written entry by entry as Pi does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pbot_watch.memory.cues import compute_cues
from pbot_watch.memory.handles import make_handle, make_short_handle
from pbot_watch.memory.models import CueState
from pbot_watch.pi.entries import SessionReader
from tests.support.pi_sessions import PiSession

SESSION = "sess-cues"
MIDNIGHT = datetime(2026, 11, 1, tzinfo=UTC)


class Work:
    """A Pi session of tool work, written as Pi writes it; each method returns the event's handle."""

    def __init__(self, path: Path, session: str = SESSION, cwd: str | None = None) -> None:
        self.path = path
        self.session = session
        # One entry a minute from midnight: the times docs/pi.md's example shows.
        self.w = PiSession(
            session, cwd=cwd or PiSession.cwd, file=path, start=MIDNIGHT, step=timedelta(minutes=1)
        )
        self.n = 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def tool(self, name: str, arguments: dict[str, Any], output: str, error: bool = False) -> str:
        """The event's handle as the cues show it (the short form; ``long`` gives search's)."""
        call = self._id("call-")
        self.w.assistant(None, calls=[(call, name, arguments)], id=self._id("a"))
        entry_id = self.w.tool_result(output, call_id=call, name=name, error=error, id=self._id("t"))
        return make_short_handle(entry_id, 0, self.session)

    def long(self, handle: str) -> str:
        """The long form of a short handle of this session (what memory search hands out)."""
        return make_handle(self.session, handle.removeprefix("#"), 0)

    def run(self, command: str, output: str = "ok\n", error: bool = False) -> str:
        return self.tool("bash", {"command": command}, output, error)

    def read(self, path: str, text: str = "line one\nline two\n") -> str:
        return self.tool("read", {"path": path}, text)

    def edit(self, path: str) -> str:
        return self.tool(
            "edit",
            {"path": path, "edits": [{"oldText": "a", "newText": "b"}]},
            f"Successfully replaced 1 block(s) in {path}.",
        )

    def recall(self, handle: str) -> None:
        """The model calls recall_memory, as the MCP tool is named inside Pi."""
        self.tool("mcp__pbot_watch__recall_memory", {"handle": handle}, "original text")

    def talk(self, text: str) -> None:
        self.w.user(text, id=self._id("u"))
        self.w.assistant(f"answer to {text}", thinking=f"thinking about {text}", id=self._id("a"))

    def ask(self, text: str = "carry on") -> str:
        return self.w.user(text, id=self._id("u"))

    def compact(self, kept: str | None = None) -> None:
        """Pi's compaction: everything before ``kept`` (default: a new user message) leaves the context."""
        entry_id = self._id("c")
        self.w.compaction(kept or self.ask(), id=entry_id)

    def cues(self, **options: Any) -> CueState:
        return cues_of(self.path, **options)


def cues_of(path: Path, **options: Any) -> CueState:
    reader = SessionReader()
    entries = reader.feed(path.read_bytes())
    assert reader.header is not None
    options.setdefault("cwd", reader.header.workspace)
    return compute_cues(entries, session_id=reader.header.id, **options)


VITEST_FAIL = """\
> budget@1.4.0 test
> vitest run

 FAIL  src/budget.test.ts > rejects amounts over the limit
AssertionError: expected 1200 to be less than or equal to 1000
 Test Files  1 failed (1)
      Tests  3 failed | 12 passed (15)
"""
VITEST_PASS = """\
> budget@1.4.0 test
> vitest run

 Test Files  1 passed (1)
      Tests  15 passed (15)
"""
BUDGET_TS = "".join(f"{n:3d}  {line}\n" for n, line in enumerate(
    ["export const LIMIT = 1000;", "", "export function check(amount: number): boolean {",
     "  return amount < LIMIT + 1;", "}"], 1))  # fmt: skip


BUDGET_CWD = "/home/dev/src/budget"


def budget_session(path: Path) -> Work:
    """docs/pi.md's example: a budget fix over three compactions, with one recall in between."""
    work = Work(path, session="019a2b3c-4d5e-7f60-8a1b-2c3d4e5f6a7b", cwd=BUDGET_CWD)
    work.ask("Fix the budget validation: amounts over the limit get through.")
    work.read(f"{BUDGET_CWD}/src/budget.ts", BUDGET_TS)
    work.run(f"cd {BUDGET_CWD} && npm test", VITEST_FAIL + "\n\nCommand exited with code 1", error=True)
    work.edit(f"{BUDGET_CWD}/src/budget.ts")
    for _ in range(2):
        work.run("npm run lint", "> budget@1.4.0 lint\n> eslint src\n\n(no problems)\n")
    passing = work.run("npm test", VITEST_PASS)
    kept = work.ask("Good. Now document the limit.")
    work.read("README.md", "# budget\n\nValidates amounts against a limit.\n")
    work.compact(kept=kept)  # batch 1: the budget work leaves the context
    work.tool(
        "write",
        {"path": f"{BUDGET_CWD}/docs/limits.md", "content": "# Limits\n"},
        f"Successfully wrote to {BUDGET_CWD}/docs/limits.md",
    )
    kept = work.ask("Commit it.")
    work.compact(kept=kept)  # batch 2: the README read and the docs write leave
    work.recall(passing)  # the model checks the passing run before committing
    work.run(
        'git commit -am "budget: reject amounts over the limit"',
        "[main 3f2a1c9] budget: reject amounts over the limit\n 2 files changed, 9 insertions(+), 1 deletion(-)\n",
    )
    work.compact()  # batch 3
    return work
