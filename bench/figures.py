"""What every bench's command line shares: its help, ``--json``, and how its figures are printed.

A bench prints its figures, never asserts them; people read the indented lines and tools (the
smoke tests, a comparison across commits) read the JSON document, so both come from one place.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose help is the bench's docstring as written (its examples keep their lines), with --json."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    return parser


def show_figures(figures: dict[str, Any], *, as_json: bool) -> None:
    """One JSON document, or a line per figure: a group's name, then its figures indented below."""
    if as_json:
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        return
    for name, values in figures.items():
        if isinstance(values, dict):
            print(name)
            for key, value in values.items():
                print(f"  {key}: {value}")
        else:
            print(f"{name}: {values}")
