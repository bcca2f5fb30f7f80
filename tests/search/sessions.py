"""Pi session files written entry by entry, for raw-memory tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class SessionWriter:
    """Appends Pi v3 entries to a JSONL file; ``parent`` defaults to the previous entry."""

    def __init__(self, path: Path, session_id: str, cwd: str = "/tmp/ws") -> None:
        self.path = path
        self.session_id = session_id
        self.last: str | None = None
        self.count = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write(
            {
                "type": "session",
                "version": 3,
                "id": session_id,
                "timestamp": "2026-11-01T00:00:00.000Z",
                "cwd": cwd,
            }
        )

    def _write(self, entry: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def entry(self, entry_id: str, body: dict[str, Any], parent: str | bool | None = True) -> str:
        self.count += 1
        parent_id = self.last if parent is True else parent
        self._write(
            {
                "id": entry_id,
                "parentId": parent_id,
                "timestamp": f"2026-11-01T{self.count // 60:02d}:{self.count % 60:02d}:00.000Z",
                **body,
            }
        )
        self.last = entry_id
        return entry_id

    def user(self, entry_id: str, text: str, parent: str | bool | None = True, image: bool = False) -> str:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if image:
            content.append(
                {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAE" * 20, "mimeType": "image/png"}
            )
        return self.entry(
            entry_id, {"type": "message", "message": {"role": "user", "content": content}}, parent
        )

    def assistant(
        self,
        entry_id: str,
        text: str = "",
        thinking: str = "",
        calls: list[tuple[str, str, dict[str, Any]]] | None = None,
    ) -> str:
        content: list[dict[str, Any]] = []
        if thinking:
            content.append({"type": "thinking", "thinking": thinking})
        if text:
            content.append({"type": "text", "text": text})
        for call_id, name, args in calls or []:
            content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
        stop = "toolUse" if calls else "stop"
        return self.entry(
            entry_id,
            {"type": "message", "message": {"role": "assistant", "content": content, "stopReason": stop}},
        )

    def tool_result(self, entry_id: str, call_id: str, name: str, output: str, error: bool = False) -> str:
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": output}],
            "isError": error,
        }
        return self.entry(entry_id, {"type": "message", "message": message})

    def bash(self, entry_id: str, command: str, output: str, code: int = 0) -> str:
        message = {"role": "bashExecution", "command": command, "output": output, "exitCode": code}
        return self.entry(entry_id, {"type": "message", "message": message})

    def compaction(self, entry_id: str, kept: str, summary: str = "## Goal\nSummary of earlier work.") -> str:
        """A compaction as Pi writes it: everything before ``kept`` leaves the model's context."""
        body = {"type": "compaction", "summary": summary, "firstKeptEntryId": kept, "tokensBefore": 50000}
        return self.entry(entry_id, body)
