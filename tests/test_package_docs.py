"""Each package's ``__init__`` docstring lists what the package holds, so a newcomer starts there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pbot_watch.cli import COMMANDS
from tests.support.paths import REPO

PACKAGE = REPO / "pbot_watch"
PACKAGES = sorted(path.parent for path in PACKAGE.rglob("__init__.py"))


def held(folder: Path) -> set[str]:
    """The package's modules and folders (code or data), as their docstring would name them."""
    names = {
        child.stem if child.suffix == ".py" else child.name
        for child in folder.iterdir()
        if child.name != "__init__.py"
        and not child.name.startswith((".", "_"))
        and (child.suffix == ".py" or (child.is_dir() and child.name != "__pycache__"))
    }
    if folder == PACKAGE:
        names.add("__main__")
    if folder == PACKAGE / "cli":  # the command modules are listed in COMMANDS, beside their help line
        names -= {module for module, _ in COMMANDS.values()}
    return names


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda path: str(path.relative_to(REPO)))
def test_every_module_is_named_in_its_package_docstring(folder: Path) -> None:
    """Every module and subfolder appears as ``name`` in the package's docstring."""
    init = folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    missing = sorted(name for name in held(folder) if f"``{name}``" not in doc)
    assert [] == missing, f"{init.relative_to(REPO)} does not name {missing}"


def test_every_command_module_exists() -> None:
    """COMMANDS, which stands in for the cli package's list, names only modules that are there."""
    assert {module for module, _ in COMMANDS.values()} <= held(PACKAGE / "cli") | {
        path.stem for path in (PACKAGE / "cli").glob("*_cmd.py")
    }
