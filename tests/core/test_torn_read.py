"""Readers never see a torn record: a real reader process against real rewrites."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pbot_watch.archive.files import ArchiveStore
from pbot_watch.indexer import Indexer
from tests.support.pi_sessions import PiSession

pytestmark = pytest.mark.slow

READER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    folder, stop, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    reads = failures = 0
    sizes = set()
    ready.write_text("go")
    while not stop.exists():
        for path in folder.glob("*.json"):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                json.loads(data)
            except ValueError:
                failures += 1
            reads += 1
            sizes.add(len(data))
    print(json.dumps({"reads": reads, "failures": failures, "versions": len(sizes)}))
    """
)


def wait_for(path: Path, deadline: float) -> None:
    end = time.monotonic() + deadline
    while not path.exists():
        if time.monotonic() > end:
            raise TimeoutError(path)
        time.sleep(0.01)


class TestTornRead:
    @pytest.mark.timeout(120)
    def test_reader_loop_never_sees_partial_record(self, tmp_path: Path) -> None:
        """While the indexer rewrites a large record 150 times, a reader process parses every read."""
        archive = tmp_path / "archive"
        archive.mkdir()
        stop, ready = tmp_path / "stop", tmp_path / "ready"
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(archive), str(stop), str(ready)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(ready, 30)
            b = PiSession(cwd=str(tmp_path))
            session = tmp_path / "s.jsonl"
            indexer = Indexer(ArchiveStore(central=archive))
            written = 0
            for i in range(150):
                b.turn(f"question {i} " + "long text " * 300, f"answer {i} " + "回答 " * 300)
                session.write_bytes(b.data())
                written += indexer.sync(session).outcome == "written"
        finally:
            stop.write_text("stop")
            out, err = reader.communicate(timeout=60)
        assert 0 == reader.returncode, err
        stats = json.loads(out)
        assert 150 == written
        assert 0 == stats["failures"]
        assert stats["reads"] > 0
        assert stats["versions"] > 1
