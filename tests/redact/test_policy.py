"""The switch, the gate and the places that redact what they hold: status, the summary cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pbot_watch.redact import policy
from tests.support.planted import planted

PLANT = next(plant for plant in planted() if plant.kind == "github")


@pytest.fixture(autouse=True)
def redaction_back_on():
    yield
    policy.configure(True)


def test_off_means_exact_text_and_on_means_redacted():
    policy.configure(False)
    assert PLANT.text == policy.scrub(PLANT.text)
    assert {"a": [PLANT.text]} == policy.scrub_json({"a": [PLANT.text]})
    policy.configure(True)
    assert PLANT.value not in policy.scrub(PLANT.text)
    assert PLANT.value not in json.dumps(policy.scrub_json({"a": [PLANT.text]}))


def test_the_gate_refuses_a_secret_whatever_the_setting_and_never_quotes_it():
    for on in (True, False):
        policy.configure(on)
        with pytest.raises(policy.SecretRefused) as refused:
            policy.refuse_secrets(f"push {PLANT.text}", "the team index")
        assert PLANT.value not in str(refused.value)
        assert "the team index" in str(refused.value)
    assert "no secret here" == policy.refuse_secrets("no secret here", "the team index")


def test_a_tool_call_argument_named_password_loses_its_value():
    block = {"name": "login", "arguments": {"user": "ada", "password": "Tr0ub4dor-3x"}}
    scrubbed = policy.scrub_structure(block)
    assert "Tr0ub4dor-3x" not in json.dumps(scrubbed)
    assert "ada" == scrubbed["arguments"]["user"]
    assert "Tr0ub4dor-3x" in json.dumps(block)  # the caller's value is not changed


def test_the_status_file_holds_no_secret(tmp_path: Path):
    from pbot_watch.service.status import Status, read_status, write_status

    status = Status(
        running=True,
        pid=1,
        version="0",
        started="2026-12-01T00:00:00Z",
        uptime_seconds=1.0,
        heartbeat="2026-12-01T00:00:01Z",
        heartbeat_epoch=1.0,
        working_on=f"reading a file that says {PLANT.text}",
    )
    write_status(tmp_path, status)
    written = next(tmp_path.rglob("status.json")).read_text()
    assert PLANT.value not in written
    assert "[redacted:github]" in written
    assert read_status(tmp_path) is not None


def test_a_cached_summary_from_before_redaction_comes_back_redacted(tmp_path: Path):
    from pbot_watch.summarize.store import SummaryStore

    store = SummaryStore(tmp_path)
    try:
        policy.configure(False)
        store.remember("k", "offline", "offline", f"The user set {PLANT.text}")
        policy.configure(True)
        cached = store.cached("k")
        assert cached is not None
        assert PLANT.value not in cached.text
    finally:
        store.close()
