"""The real Pi 1.6 opens a v1 session file and rewrites it as v3: labels, cues and handles survive.

Pi gives every entry a random id when it migrates a v1 file, so nothing pbot-watch handed out
before can carry Pi's ids. The v1 file is read as Pi reads it (``firstKeptEntryIndex`` is the
kept entry), and a handle of the v1 file names the entry at its position, which the rewrite
keeps: what ``memory search``, ``cues`` and ``recall`` say before Pi opens the file, they say
after it rewrote it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import scripted_model
from tests.e2e.pi_harness import MODEL_REF, PiWorld
from tests.e2e.pi_install import PiInstall
from tests.memory.test_v1 import v1_work
from tests.support.cli import invoke
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

BEFORE_PI = "2026-11-30"
"""The v1 file's own entries are older than this; Pi's turn after the rewrite is of today."""


def cli_json(*args: str) -> Any:
    done = invoke(*args, "--json")
    assert 0 == done.returncode, done.stderr
    return json.loads(done.stdout)


def labels(sessions: Path) -> list[tuple[str, str, str, str]]:
    hits = cli_json("memory", "search", "--sessions", str(sessions), "--limit", "50")["hits"]
    return [(h["kind"], h["timestamp"], h["label"], h["context"]) for h in hits if h["timestamp"] < BEFORE_PI]


def cue_lines(path: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    state = cli_json("cues", "--session-file", str(path))
    lines = state["lines"]
    return [line["handle"] for line in lines], [
        (line["stage"], line["class"], line["text"].replace(line["handle"], "HANDLE")) for line in lines
    ]


def test_labels_cues_and_handles_survive_pis_rewrite(pi_install: PiInstall, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with OpenAIServer(handler=scripted_model.handler) as model:
        world = PiWorld.create(pi_install, tmp_path / "pi", model.base_url, dict(os.environ))
        path = world.sessions / "--project--" / "v1.jsonl"
        v1_work(cwd=str(project)).write(path)
        before = labels(world.sessions)
        handles, cues = cue_lines(path)
        hits = cli_json("memory", "search", "zqxv1", "--sessions", str(world.sessions))["hits"]
        texts = {
            h: cli_json("recall", h, "--sessions", str(world.sessions))["text"]
            for h in [hits[0]["handle"], *handles]
        }
        world.pi_cli("--model", MODEL_REF, "--session", str(path), "-p", "Carry on.", cwd=project)
    header, *entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert 3 == header["version"]
    assert all(re.fullmatch("[0-9a-f]{8}", e["id"]) for e in entries)  # Pi's own ids now
    kept = [e["firstKeptEntryId"] for e in entries if e["type"] == "compaction" and "firstKeptEntryId" in e]
    assert 2 == len(kept)  # the index past its compaction named nothing
    assert before == labels(world.sessions)
    assert {"historical", "retained"} == {c for *_rest, c in before}
    after_handles, after_cues = cue_lines(path)
    assert cues == after_cues
    assert handles != after_handles
    assert texts == {h: cli_json("recall", h, "--sessions", str(world.sessions))["text"] for h in texts}
