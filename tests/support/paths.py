"""Where the tests find the repository and the read-only fixtures beside it (``../shared/``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures" / "pi-sessions"
