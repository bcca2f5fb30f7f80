"""docs/search.md documents every field of every --json shape, and every option of the commands."""

from __future__ import annotations

import click
import pytest
from pydantic import BaseModel

from pbot_watch.cli import main
from pbot_watch.memory import models as memory_models
from pbot_watch.search import models
from tests.support.paths import REPO

DOC = (REPO / "docs" / "search.md").read_text(encoding="utf-8")
SHAPES = [
    models.SearchResult,
    models.SearchMatch,
    models.NodePage,
    models.NodeSource,
    memory_models.MemorySearchResult,
    memory_models.MemoryHit,
    memory_models.MemorySection,
    memory_models.RecallPage,
]


@pytest.mark.parametrize("model", SHAPES, ids=lambda m: m.__name__)
def test_every_field_is_documented(model: type[BaseModel]) -> None:
    """Each JSON field name (by alias) appears in backticks in docs/search.md."""
    for name, field in model.model_fields.items():
        key = field.alias or name
        assert f"`{key}" in DOC or f"{key}`" in DOC or f'"{key}"' in DOC, f"{model.__name__}.{key}"


@pytest.mark.parametrize("path", [["search"], ["read"], ["memory", "search"], ["recall"], ["reindex"]])
def test_every_option_is_documented(path: list[str]) -> None:
    """Each option of the commands appears in docs/search.md."""
    command: click.Command | None = main
    for part in path:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), part)  # commands load lazily
    assert command is not None
    for param in command.params:
        for opt in getattr(param, "opts", []):
            if opt.startswith("--") and opt != "--help":
                assert opt in DOC, f"{' '.join(path)} {opt}"
