"""The query commands' options are their tools' argument models: one declaration, two edges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest

from pbot_watch.cli import main
from pbot_watch.config import Settings
from pbot_watch.tools.arguments import (
    Cli,
    HistoryReadArgs,
    HistorySearchArgs,
    RecallMemoryArgs,
    SearchMemoryArgs,
    ToolArguments,
)
from pbot_watch.tools.registry import call
from tests.support.cli import invoke
from tests.support.pi_sessions import PiSession

COMMANDS: list[tuple[list[str], type[ToolArguments]]] = [
    (["search"], HistorySearchArgs),
    (["read"], HistoryReadArgs),
    (["memory", "search"], SearchMemoryArgs),
    (["recall"], RecallMemoryArgs),
]


def command_of(path: list[str]) -> click.Command:
    command: click.Command | None = main
    for part in path:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), part)  # commands load lazily
    assert command is not None
    return command


def shown(param: click.Parameter) -> dict[str, Any]:
    """What a person can see of a parameter: its help, default, limits and choices."""
    kind = param.type
    return {
        "help": getattr(param, "help", None),
        "default": param.default,
        "min": getattr(kind, "min", None),
        "max": getattr(kind, "max", None),
        "choices": list(getattr(kind, "choices", [])),
    }


def declared(model: type[ToolArguments], name: str) -> dict[str, Any]:
    """The same, as the argument model declares it (what the MCP and Pi schemas say)."""
    schema = model.model_json_schema(by_alias=True)["properties"][model.model_fields[name].alias or name]
    if "anyOf" in schema:
        schema = {**schema, **next(s for s in schema["anyOf"] if s != {"type": "null"})}
    return {
        "help": model.model_fields[name].description,
        "default": schema.get("default"),
        "min": schema.get("minimum"),
        "max": schema.get("maximum"),
        "choices": schema.get("enum", []),
    }


@pytest.mark.parametrize(("path", "model"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_each_option_is_its_argument(path: list[str], model: type[ToolArguments]) -> None:
    """Every argument a person may give is one option or argument with the model's help, default, limits and choices."""
    params = {p.name: p for p in command_of(path).params if not getattr(p, "hidden", False)}
    for name, info in model.model_fields.items():
        cli = next((m for m in info.metadata if isinstance(m, Cli)), Cli())
        if cli.omitted:
            assert name not in params, name
            continue
        param = params[name]
        if isinstance(param, click.Argument):
            assert info.is_required() == param.required, name
            continue
        assert declared(model, name) == shown(param), f"{' '.join(path)} {name}"


def test_only_the_models_limits_are_written() -> None:
    """The tools' limits and the command line's are the same numbers (pbot's 50 and 24000, pi-echo's 50)."""
    limits = {
        " ".join(path): shown(next(p for p in command_of(path).params if p.name == "limit"))["max"]
        for path, _ in COMMANDS[:3]
    }
    assert {"search": 50, "read": 24000, "memory search": 50} == limits


class TestReadLength:
    def test_length_is_read_s_limit(self, tmp_path: Path) -> None:
        """`read --length` is the tool's `limit`; the old `--limit` still works, and --help shows only --length."""
        root = tmp_path / "sessions"
        w = PiSession("sess-r", file=root / "ws" / "s.jsonl")
        w.user("how long is a piece of string", id="u1")
        w.assistant("twice half its length", id="a1")
        archive = tmp_path / "archive"
        where = ("--sessions", str(root), "--archive", str(archive))
        assert 0 == invoke("index", *where).returncode
        hit = json.loads(invoke("search", "string", *where, "--json").stdout)["matches"][0]
        new = invoke("read", hit["id"], "--length", "5", "--json", *where)
        old = invoke("read", hit["id"], "--limit", "5", "--json", *where)
        assert (0, 0) == (new.returncode, old.returncode), old.stderr
        assert json.loads(new.stdout) == json.loads(old.stdout)
        assert 5 == len(json.loads(new.stdout)["text"])
        shown = invoke("read", "--help").stdout
        assert "--length" in shown
        assert "--limit" not in shown


class TestErrorsNameTheArgument:
    def test_cursor_error_names_the_flag_on_the_command_line_and_the_argument_for_a_model(
        self, tmp_path: Path
    ) -> None:
        """One error, two spellings: `--after`, `--in, --session or --leaf` for a person; `after`, `in, sessionId or leaf` for a model."""
        root = tmp_path / "sessions"
        w = PiSession("sess-c", file=root / "s.jsonl")
        for n in range(3):
            w.user(f"deploy step {n}", id=f"u{n}")
        where = ("--sessions", str(root))
        first = json.loads(invoke("memory", "search", "deploy", "--limit", "1", "--json", *where).stdout)
        cursor = first["nextCursor"]
        assert cursor is not None
        refused = invoke("memory", "search", "other", "--after", cursor, *where)
        assert 2 == refused.returncode
        assert "different query, match, --in, --session or --leaf" in refused.stderr
        assert "repeat the search without --after" in refused.stderr
        settings = Settings(sessions=[root], archive=tmp_path / "archive", state_dir=tmp_path / "state")
        answer = call("search_memory", {"query": "other", "after": cursor}, settings)
        assert "different query, match, in, sessionId or leaf" in answer.text
        assert "repeat the search without after" in answer.text
        assert "--" not in answer.text
