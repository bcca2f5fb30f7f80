"""The redaction step on planted secrets (every shape, every kind) and on decoys (none touched)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pbot_watch.redact import KINDS, RULES, find_secrets, holds_secret, marker, redact
from pbot_watch.redact.rules import ANCHORS, HOLDS_ANCHOR, PREFILTER_FINDITER
from tests.support.planted import decoys, planted

PLANTS = planted()


def test_the_planted_corpus_covers_every_kind_in_thirty_shapes_or_more():
    assert len(PLANTS) >= 30
    assert {plant.kind for plant in PLANTS} == set(KINDS)


@pytest.mark.parametrize("plant", PLANTS, ids=[plant.shape for plant in PLANTS])
def test_each_planted_secret_is_replaced_by_a_marker_naming_its_kind(plant):
    redaction = redact(plant.text)
    assert plant.value not in redaction.text
    assert marker(plant.kind) in redaction.text
    assert {plant.kind: 1} == dict(redaction.counts)
    assert holds_secret(plant.text)
    assert not holds_secret(redaction.text)
    assert redaction.text == redact(redaction.text).text  # redacting twice changes nothing


@pytest.mark.parametrize("decoy", decoys())
def test_decoys_are_left_alone(decoy):
    assert [] == find_secrets(decoy)
    assert decoy == redact(decoy).text
    assert not holds_secret(decoy)


def test_the_key_stays_and_only_the_value_goes():
    assert "DB_PASSWORD=[redacted:password] next" == redact("DB_PASSWORD=hunter2 next").text
    assert (
        "postgres://app:[redacted:url-credentials]@db:5432/app"
        == redact("postgres://app:hunter2@db:5432/app").text
    )
    assert '{"password": "[redacted:password]"}' == redact('{"password": "hunter2"}').text


def test_a_prefix_inside_a_word_is_no_token():
    body = "Ab1" * 12
    assert "" == "".join(f.kind for f in find_secrets(f"risk-{body} task-{body}"))
    assert ["openai"] == [f.kind for f in find_secrets(f"key sk-{body}")]


def test_a_bare_git_sha_is_never_redacted():
    sha = "3f786850e387550fdab836ed7e6dc881de23001b"
    for text in (sha, f"commit {sha}", f"token={sha}x"[:-1], f'"sha": "{sha}"', f"SECRET_KEY_SHA={sha}"):
        assert "high-entropy" not in redact(text).counts


def test_overlapping_rules_name_the_vendor():
    body = "Ab1" * 16
    assert {"openai": 1} == dict(redact(f"OPENAI_API_KEY=sk-{body}").counts)


def test_findings_never_show_the_value():
    secret = "hunter2-" + "Zq9" * 5
    (finding,) = find_secrets(f"PASSWORD={secret}")
    assert secret not in repr(finding)
    assert "password" == finding.kind


def test_every_rule_names_a_kind_and_an_anchor():
    for rule in RULES:
        assert re.fullmatch(r"[a-z][a-z0-9-]*", rule.kind)
        assert rule.anchors


def test_a_text_without_secrets_comes_back_as_the_same_object():
    text = "nothing to see here: the function returns a list"
    assert redact(text).text is text
    assert {} == dict(redact(text).counts)


@given(st.text(max_size=400))
def test_any_text_is_redacted_to_a_text_the_gate_lets_pass(text):
    once = redact(text)
    assert not holds_secret(once.text)
    assert once.text == redact(once.text).text


@given(
    st.sampled_from(PLANTS), st.text(alphabet=st.characters(codec="utf-8"), max_size=40), st.text(max_size=40)
)
def test_a_planted_secret_in_any_surroundings_is_gone(plant, before, after):
    text = f"{before}\n{plant.text}\n{after}"
    assert plant.value not in redact(text).text


@given(st.text(max_size=200), st.sampled_from([*ANCHORS, ""]), st.text(max_size=40))
def test_the_one_scan_sees_every_anchor_the_places_do(before, anchor, after):
    """``HOLDS_ANCHOR`` (on the text's bytes) says yes exactly where ``PREFILTER_FINDITER`` finds a place."""
    text = f"{before}{anchor}{after}"
    assert HOLDS_ANCHOR(text) == bool(PREFILTER_FINDITER(text))


@pytest.mark.parametrize("around", ["", "\ud800 half a character ", "日本語のテキスト "])
def test_a_secret_beside_any_character_is_found(around):
    """A lone surrogate (RE2 cannot read it) or CJK beside a secret: the text is still redacted."""
    plant = PLANTS[0]
    text = f"{around}{plant.text}{around}"
    assert plant.value not in redact(text).text
    assert holds_secret(text)
