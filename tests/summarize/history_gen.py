"""Generated Pi sessions for summary tests and ``bench/summary_cost.py``: branches, forks, appends.

Entries have the shape Pi 1.6.0 writes (version-3 header, ``message`` entries linked by
``parentId``). A fork copies the entries of the current branch into a new session file with
a new session id, ids and timestamps unchanged, as ``pi --fork`` does; so its groups have
the same input text as the original's, and only a content-keyed cache can notice.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EPOCH = datetime(2026, 11, 1, 9, 0, 0, tzinfo=UTC)

TOPICS_EN = [
    (
        "Fix the failing test in tests/test_api.py",
        "I ran `pytest -q tests/test_api.py`; the KeyError came from src/api/views.py and is fixed.",
    ),
    (
        "Add a --dry-run flag to scripts/deploy.sh",
        "Added --dry-run to scripts/deploy.sh; it prints the rsync command instead of running it.",
    ),
    (
        "Why is the build slow?",
        "The build spends most time in webpack; caching node_modules/.cache halves it.",
    ),
    (
        "Rename UserStore to AccountStore",
        "Renamed UserStore to AccountStore in src/store/account.ts and updated 14 imports.",
    ),
]
TOPICS_ZH = [
    (
        "请修复 src/app.py 里的登录错误",
        "我检查了 src/app.py，密码校验失败是编码问题，已改为 utf-8，`pytest -q` 通过。",
    ),
    ("把配置文件迁移到 TOML", "已把 config.yaml 迁移到 config.toml，并更新了 README.md 的说明。"),
]


def iso(seconds: int) -> str:
    moment = EPOCH + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass
class PiSession:
    """One session file's entries; ``leaf`` is where the next entry hangs."""

    session_id: str
    cwd: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    leaf: str | None = None
    clock: int = 0
    parent_session: str | None = None

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {
            "type": "session",
            "version": 3,
            "id": self.session_id,
            "timestamp": iso(0),
            "cwd": self.cwd,
        }
        if self.parent_session:
            head["parentSession"] = self.parent_session
        return head

    def _add(self, message: dict[str, Any]) -> str:
        self.clock += 7
        entry_id = uuid.uuid5(uuid.NAMESPACE_OID, f"{self.session_id}:{len(self.entries)}:{self.clock}").hex[
            :8
        ]
        self.entries.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": self.leaf,
                "timestamp": iso(self.clock),
                "message": message,
            }
        )
        self.leaf = entry_id
        return entry_id

    def user(self, text: str) -> str:
        return self._add(
            {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": self.clock}
        )

    def assistant(self, text: str, stop: str = "stop") -> str:
        return self._add(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "api": "openai-completions",
                "provider": "fakeai",
                "model": "fake-model-1",
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
                "stopReason": stop,
                "timestamp": self.clock,
            }
        )

    def exchange(self, index: int, chinese: bool = False) -> None:
        topics = TOPICS_ZH if chinese else TOPICS_EN
        question, answer = topics[index % len(topics)]
        self.user(f"{question} (#{index})")
        self.assistant(f"{answer} (#{index})")

    def exchanges(self, count: int, start: int = 0, chinese: bool = False) -> None:
        for i in range(start, start + count):
            self.exchange(i, chinese)

    def branch_at(self, entry_id: str | None) -> None:
        """Continue from an earlier entry (Pi's /tree): later entries start a new branch."""
        self.leaf = entry_id

    def fork(self, session_id: str | None = None) -> PiSession:
        """A new session holding the current branch's entries, as ``pi --fork`` writes it."""
        by_id = {e["id"]: e for e in self.entries}
        path: list[dict[str, Any]] = []
        current = by_id.get(self.leaf) if self.leaf else None
        while current is not None:
            path.append(current)
            current = by_id.get(current["parentId"]) if current["parentId"] else None
        path.reverse()
        return PiSession(
            session_id or str(uuid.uuid4()),
            self.cwd,
            [dict(e) for e in path],
            self.leaf,
            self.clock,
            parent_session=self.session_id,
        )

    def data(self) -> bytes:
        lines = [self.header(), *self.entries]
        return b"".join(
            (json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n").encode() for e in lines
        )

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data())
        return path

    def append_to(self, path: Path, since: int) -> int:
        """Append entries ``since`` onwards to ``path`` (as Pi does); returns the new count."""
        with path.open("ab") as handle:
            for entry in self.entries[since:]:
                handle.write((json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode())
        return len(self.entries)


def generated_history(
    root: Path, exchanges: int, branches: int = 3, forks: int = 2, cwd: str = "/w"
) -> list[Path]:
    """A workload: one session of ``exchanges`` on the main line with ``branches`` side branches,
    then ``forks`` forked sessions that each continue the main line a little further."""
    main = PiSession(str(uuid.UUID(int=1)), cwd)
    main.exchanges(exchanges)
    files = [main.write(root / "main.jsonl")]
    # Side branches off the middle of the main line, each as long as a quarter of it.
    trunk = [e["id"] for e in main.entries]
    end = main.leaf
    for b in range(branches):
        main.branch_at(trunk[(len(trunk) // 2) - 1 - 2 * b])
        main.exchanges(max(4, exchanges // 4), start=1000 * (b + 1))
    main.branch_at(end)
    files[0] = main.write(root / "main.jsonl")
    for f in range(forks):
        fork = main.fork(str(uuid.UUID(int=100 + f)))
        fork.exchanges(4, start=5000 * (f + 1))
        files.append(fork.write(root / f"fork-{f}.jsonl"))
    return files
