"""Options every command shares, so a central archive is searched as easily as workspaces."""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from pbot_watch.cli.errors import CommandError
from pbot_watch.errors import exit_code

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from pbot_watch.tools.arguments import ToolArguments

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def archive_options(func: F) -> F:
    """``--sessions DIR`` (repeatable) and ``--archive DIR``."""
    func = click.option(
        "--archive",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Write/read records in this central folder instead of each workspace's .pi/pbot/history.",
    )(func)
    return click.option(
        "--sessions",
        "sessions",
        multiple=True,
        type=click.Path(path_type=Path, file_okay=False),
        help="A Pi session root to read (repeatable). Default: ${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions.",
    )(func)


def json_option(what: str) -> Callable[[F], F]:
    """``--json``: print ``what`` (the result, the page) as the documented JSON shape."""
    return click.option(
        "--json", "as_json", is_flag=True, help=f"Print the {what} as JSON (see docs/search.md)."
    )


class HiddenAliasOption(click.Option):
    """An option that still accepts an old spelling for one release, shown nowhere.

    ``--help`` and the "missing option" hint name only the current spelling, so nobody learns
    the old one; scripts written against it keep working until it is removed.
    """

    def __init__(self, *args: Any, hidden_aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = hidden_aliases

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        return self._without_aliases(lambda: super(HiddenAliasOption, self).get_help_record(ctx))

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return self._without_aliases(lambda: super(HiddenAliasOption, self).get_error_hint(ctx))

    def _without_aliases(self, render: Callable[[], T]) -> T:
        shown, self.opts = self.opts, [opt for opt in self.opts if opt not in self.hidden_aliases]
        try:
            return render()
        finally:
            self.opts = shown


# ---- a query command's options, generated from its tool's argument model ---------------------


def query_options(model: type[ToolArguments]) -> Callable[[F], F]:
    """The arguments and options of a query command, made from its tool's argument model.

    The model (``pbot_watch.tools.arguments``) is the one declaration of the query's
    parameters: each field becomes an option named after its published name, or as its ``Cli``
    says, with the field's description as help, its default, its limits (``IntRange``) and
    choices (``Choice``). The command receives ``args``, the validated model, in place of those
    options, and calls the same function the tool does with it.

    This is also the one place an argument's published name becomes its flag: a query error
    that names ``after`` reaches the person as ``--after`` (``QueryError.naming``).
    """
    from pydantic import ValidationError  # noqa: PLC0415 - only query commands load pydantic

    from pbot_watch.search.errors import QueryError  # noqa: PLC0415

    specs = [spec for name, info in model.model_fields.items() if (spec := _QuerySpec.of(name, info))]
    flags = {spec.published: spec.flag for spec in specs if spec.flag}

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def command(**given: Any) -> Any:
            values = {}
            for spec in specs:  # a value not given is left to the model's default
                value = given.pop(spec.name)
                if value is not None:
                    values[spec.published] = value
            try:
                args = model.model_validate(values)
            except ValidationError as error:  # click checked types and limits: this is a bug
                raise click.UsageError(f"invalid arguments for {model.__name__}: {error}") from error
            try:
                return func(args, **given)
            except QueryError as error:
                raise CommandError(
                    error.naming(lambda name: flags.get(name, name)), exit_code(error)
                ) from error

        for spec in reversed(specs):  # click lists the last one applied first
            command = spec.decorator(command)
        return command  # type: ignore[return-value]  # click's callback takes the options as keywords

    return decorate


@dataclass(frozen=True)
class _QuerySpec:
    """One field of an argument model on the command line: its click parameters and how to read them."""

    name: str
    """The field's Python name: the click parameter's, so the callback's keyword."""
    published: str
    """The name the tools publish (``sessionId``): the model is validated by it."""
    flag: str | None
    """``None``: a positional argument."""
    decorator: Callable[[F], F]

    @classmethod
    def of(cls, name: str, info: FieldInfo) -> _QuerySpec | None:
        from pbot_watch.tools.arguments import Cli  # noqa: PLC0415

        cli = next((m for m in info.metadata if isinstance(m, Cli)), Cli())
        if cli.omitted:
            return None
        published = info.alias or name
        kind = _click_type(info)
        if cli.positional or info.is_required():
            required = info.is_required()
            argument = click.argument(name, type=kind, required=required, metavar=cli.metavar)
            return cls(name, published, None, argument)
        flag = cli.flag or "--" + re.sub(r"(?<!^)(?=[A-Z])", "-", published).lower()
        default = info.get_default()
        option = click.option(
            flag,
            *cli.old_flags,
            name,
            cls=HiddenAliasOption,
            hidden_aliases=cli.old_flags,
            type=kind,
            default=default,
            # A description that states the default (as the model reads it) needs no second one.
            show_default=default is not None and "default" not in (info.description or ""),
            metavar=cli.metavar,
            help=info.description,
        )
        return cls(name, published, flag, option)


def _click_type(info: FieldInfo) -> click.ParamType[Any]:
    """The field's type for click: its choices, or a whole number within its limits, or text."""
    annotation = info.annotation
    if typing.get_origin(annotation) in {typing.Union, types.UnionType}:
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return click.Choice([str(choice) for choice in typing.get_args(annotation)])
    if annotation is int:
        low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
        high = next((m.le for m in info.metadata if hasattr(m, "le")), None)
        return click.IntRange(low, high) if low is not None or high is not None else click.INT
    return click.STRING
