"""What every tool is made of: its argument model, its spec, and what it runs under.

The argument models live in ``arguments.py`` (the one declaration of each query's parameters);
the model is the one source of the JSON Schema, of validation and of the command line's options.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from pbot_watch.tools.arguments import ToolArguments

if TYPE_CHECKING:
    from pbot_watch.config import Settings
    from pbot_watch.memory.query import MemoryScope


@dataclass(frozen=True)
class ToolContext:
    """What a call runs under, set by the caller, never by the model's arguments."""

    settings: Settings
    scope: MemoryScope | None = None
    """The branch the memory tools may see (the calling Pi session's); ``None``: every session's."""


A = TypeVar("A", bound=ToolArguments)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Tool(Generic[A, R]):
    """One tool: what the model reads about it, its argument and result models, how it runs and reads."""

    name: str
    title: str
    description: str
    arguments: type[A]
    result: type[R]
    run: Callable[[A, ToolContext], R]
    """The query; blocking (SQLite, session files): a transport runs it off its event loop."""
    render: Callable[[R, A], str]
    """The result as compact text for the model; the structured result is ``result`` as JSON."""

    def input_schema(self) -> dict[str, Any]:
        return tidy_schema(self.arguments.model_json_schema(by_alias=True))

    def output_schema(self) -> dict[str, Any]:
        return self.result.model_json_schema(by_alias=True, mode="serialization")


def tidy_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The argument schema as a model should read it: no titles, optional means "may be omitted".

    pydantic spells ``str | None = None`` as ``anyOf: [string, null]``; the tools accept an
    explicit null as "not given", but advertising just ``string`` is simpler for every client.
    """

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: clean(v) for k, v in node.items() if k != "title"}
            options = node.get("anyOf")
            if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
                (kept,) = [o for o in options if o != {"type": "null"}]
                node = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept}
                if node.get("default", 0) is None:
                    del node["default"]
            return node
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    tidy: dict[str, Any] = clean(schema)
    tidy.setdefault("required", [])
    return tidy
