"""How a query command's process starts: what it skips and how it collects garbage before its query.

A query command (``search``, ``read``, ``memory search``, ``recall``) is a whole process that a
script or an agent starts for every call, so all it does before the query is paid per call
(``bench/cli_latency.py`` measures it). Two costs of that start-up are not the query's:

* **pydantic's plugins.** The first model pydantic completes asks its plugin loader for the
  installed plugins: the loader imports ``importlib.metadata`` (with ``email``, ``zipfile``,
  ``csv``, ``socket`` and ``tempfile`` behind it) and reads the entry points of every installed
  distribution. pbot-watch uses no pydantic plugin and a query process validates only its own
  arguments, settings and results, so a query process tells pydantic there are none, as
  ``PYDANTIC_DISABLE_PLUGINS=__all__`` would, without importing the loader. A person who sets
  ``PYDANTIC_DISABLE_PLUGINS`` (to name the plugins to leave out) keeps pydantic's own handling.
* **garbage collection while importing.** Importing the query's modules allocates tens of
  thousands of objects that live as long as the process, and each 700 allocations start a
  collection that walks them again. While a query process imports, collections wait for 50,000
  allocations; before the query runs, what was imported is frozen (``gc.freeze``: never walked
  again) and the usual thresholds come back, so the query's own garbage is collected as usual.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from collections.abc import Iterable

PLUGIN_LOADER = "pydantic.plugin._loader"
"""The module pydantic's ``create_schema_validator`` imports ``get_plugins`` from."""

IMPORT_THRESHOLD = 50_000
"""Allocations between young collections while a query process imports its modules."""

_usual_thresholds: tuple[int, int, int] | None = None


def start() -> None:
    """Before a query command's module is imported: no plugin discovery, fewer collections."""
    global _usual_thresholds  # noqa: PLW0603 - one process, one start-up
    if "PYDANTIC_DISABLE_PLUGINS" not in os.environ and PLUGIN_LOADER not in sys.modules:
        sys.modules[PLUGIN_LOADER] = _no_plugins()
    if _usual_thresholds is None:
        _usual_thresholds = gc.get_threshold()
        gc.set_threshold(IMPORT_THRESHOLD, *_usual_thresholds[1:])


def imported() -> None:
    """Once the query's modules are imported, before it runs: freeze them, collect as usual again."""
    global _usual_thresholds  # noqa: PLW0603 - one process, one start-up
    if _usual_thresholds is not None:
        gc.freeze()
        gc.set_threshold(*_usual_thresholds)
        _usual_thresholds = None


def _no_plugins() -> types.ModuleType:
    """A stand-in for pydantic's plugin loader that finds no plugin (what an install without one finds)."""
    module = types.ModuleType(PLUGIN_LOADER, "pydantic's plugin loader in a query process: no plugins.")

    def get_plugins() -> Iterable[object]:
        return ()

    module.get_plugins = get_plugins  # type: ignore[attr-defined]  # the one name pydantic imports
    return module
