"""Errors worded for a model: what was wrong with the arguments, and what to pass instead.

A query's own errors need no rewording: they name arguments by their published names
(``pbot_watch.search.errors.Argument``), which is what a model passes.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationError

from pbot_watch.tools.base import Tool


def describe_arguments_error(tool: Tool[Any, Any], error: ValidationError) -> str:
    """One message naming every bad argument and what to pass instead."""
    fields = tool.arguments.model_fields
    allowed = [info.alias or name for name, info in fields.items()]
    problems: list[str] = []
    for item in error.errors():
        name = ".".join(str(part) for part in item["loc"]) or "arguments"
        kind = item["type"]
        context = item.get("ctx") or {}
        got = f" (got {item['input']!r})" if kind not in {"missing", "extra_forbidden"} else ""
        if kind == "extra_forbidden":
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            problems.append(f"{name}: unknown argument{hint} (allowed: {', '.join(allowed)})")
        elif kind == "missing":
            info = next((i for n, i in fields.items() if (i.alias or n) == name), None)
            problems.append(f"{name}: required. {info.description if info else ''}".rstrip())
        elif kind in {"less_than_equal", "less_than"}:
            problems.append(f"{name}: must be at most {context.get('le', context.get('lt'))}{got}")
        elif kind in {"greater_than_equal", "greater_than"}:
            problems.append(f"{name}: must be at least {context.get('ge', context.get('gt'))}{got}")
        elif kind in {"int_type", "int_parsing", "int_from_float"}:
            problems.append(f"{name}: must be a whole number{got}")
        elif kind == "string_type":
            problems.append(f"{name}: must be a string{got}")
        elif kind == "literal_error":
            problems.append(f"{name}: must be one of {context.get('expected')}{got}")
        elif kind == "model_type":
            problems.append(f"arguments must be a JSON object{got}")
        else:
            problems.append(f"{name}: {item['msg']}{got}")
    return (
        f"Invalid arguments for {tool.name}: "
        + "; ".join(problems)
        + f". Fix them and call {tool.name} again."
    )
