"""Summaries from a real model through litellm: the only module that imports litellm.

litellm is imported on first use (it takes seconds and reads a cost map; ``status``, ``search``
and ``read`` must stay fast), after ``LITELLM_LOCAL_MODEL_COST_MAP`` is set so that it never
fetches that map from the network.

Why an event loop: a person typing again must stop the call in flight at once. The request
runs as a task in anyio's blocking portal (an asyncio loop on a daemon thread); ``summarize``
waits on it and cancels the task when ``cancel`` is set, which closes the HTTP connection (the
provider sees the client go away and stops generating). One long-lived portal, not
``asyncio.run`` per call, because litellm caches its async HTTP clients and they must not
outlive their loop.

Retries: transient failures (timeouts, 429, 5xx, connection errors) are retried here with
tenacity, with backoff; litellm's and the OpenAI SDK's own hidden retries are turned off
(``num_retries=0``, ``max_retries=0``) so every attempt is counted and cancellable. Auth and
bad-request errors fail at once. Every attempt counts against the caps, whatever became of it
(see ``_count_failed``). An answer that cannot be a summary (``check_answer``: empty, not
well-formed text, too long, not shorter than its input), or one cut by the output limit, is
rejected.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, TypeVar

import structlog
from anyio.from_thread import BlockingPortal, start_blocking_portal

from pbot_watch.redact.policy import scrub
from pbot_watch.summarize.base import (
    Cancelled,
    ModelRefused,
    Summary,
    SummaryFailed,
    budget_for_context,
    check_answer,
    describe_error,
    summarize_in_parts,
    usage_cost,
    usage_count,
)
from pbot_watch.summarize.prompts import Prompt, load_prompt

if TYPE_CHECKING:  # annotations only: both are imported where a model is called
    from litellm import ModelResponse
    from tenacity import AsyncRetrying

MAX_OUTPUT_TOKENS = 2048
ATTEMPTS = 4
RETRY_WAIT_SECONDS = 2.0
RETRY_WAIT_MAX_SECONDS = 60.0
CANCEL_POLL_SECONDS = 0.02
# Pi's estimate of a text's tokens, used for a request that may be billed but reported no usage.
CHARS_PER_TOKEN = 4

T = TypeVar("T")

log = structlog.get_logger("pbot_watch.summarize")


def litellm() -> ModuleType:
    """Import litellm the one allowed way.

    The first import is logged with how long it took (``litellm_loaded``): seconds of CPU, many
    more on a loaded machine, before the first request can leave, which is why a first summary
    may be late; it is also the moment after which a request's lateness is the model's.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    first = "litellm" not in sys.modules
    started = time.monotonic()
    import litellm as module  # noqa: PLC0415 - lazily, see the module docstring

    module.suppress_debug_info = True
    if first:
        log.info("litellm_loaded", seconds=round(time.monotonic() - started, 2))
    return module


class CallMeter(Protocol):
    """Where calls are allowed and counted: limits are checked before each request, usage after."""

    def before_call(self) -> None:
        """Raise ``LimitReached`` when no more calls are allowed."""

    def after_call(self, model: str, input_tokens: int, output_tokens: int, cost_usd: float) -> None: ...


def is_transient(error: BaseException) -> bool:
    """Worth another attempt: timeouts, rate limits, server errors and broken connections."""
    module = litellm()
    if isinstance(
        error,
        (
            module.Timeout,
            module.RateLimitError,
            module.APIConnectionError,
            module.InternalServerError,
            module.ServiceUnavailableError,
            module.BadGatewayError,
        ),
    ):
        return True
    if isinstance(
        error,
        (
            module.AuthenticationError,
            module.BadRequestError,
            module.NotFoundError,
            module.PermissionDeniedError,
        ),
    ):
        return False
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and status >= 500


_PORTAL: BlockingPortal | None = None
_PORTAL_LOCK = threading.Lock()


def _portal() -> BlockingPortal:
    """The process's one portal, started on first use and kept until exit.

    Kept across calls: litellm caches its async HTTP clients, and a client bound to a loop that
    was closed would hang or fail the next call. Stopped at exit, while its daemon thread still
    runs: left to the interpreter's final cleanup, stopping it would wait on a thread that no
    longer runs.
    """
    global _PORTAL  # noqa: PLW0603 - one portal per process, see above
    with _PORTAL_LOCK:
        if _PORTAL is None:
            running = start_blocking_portal(name="pbot-watch-model")
            _PORTAL = running.__enter__()
            atexit.register(_stop_portal, running)
        return _PORTAL


def _stop_portal(running: AbstractContextManager[BlockingPortal]) -> None:
    # An exception on the way out makes the portal cancel its remaining tasks, not wait for them.
    running.__exit__(Cancelled, Cancelled(), None)


def _run(call: Callable[[], Awaitable[T]], cancel: threading.Event) -> T:
    """Await ``call()`` in the portal; cancel it (closing its connection) as soon as ``cancel`` is set."""
    future = _portal().start_task_soon(call)
    while True:
        try:
            return future.result(CANCEL_POLL_SECONDS)
        except concurrent.futures.TimeoutError:
            if cancel.is_set():
                future.cancel()
                raise Cancelled from None
        except concurrent.futures.CancelledError:
            raise Cancelled from None


@dataclass
class LitellmSummarizer:
    """The ``Summarizer`` for a configured model (``openai/...``, ``anthropic/...``, ``ollama/...``)."""

    model: str
    api_base: str | None = None
    request_timeout: float = 60.0
    context_tokens: int | None = None
    meter: CallMeter | None = None
    attempts: int = ATTEMPTS
    retry_wait: float = RETRY_WAIT_SECONDS
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    prompt: Prompt | None = None
    offline = False

    def __post_init__(self) -> None:
        self._prompt = self.prompt or load_prompt()
        self._budget: int | None = None

    @property
    def id(self) -> str:
        return f"litellm/{self.model}"

    @property
    def prompt_version(self) -> str:
        return self._prompt.version

    @property
    def budget(self) -> int:
        """Input units per request: from the model's context window when litellm knows it."""
        if self._budget is None:
            context = self.context_tokens
            if context is None:
                try:
                    info = litellm().get_model_info(self.model)
                    context = info.get("max_input_tokens") or info.get("max_tokens")
                except Exception:  # noqa: BLE001 - unknown model: litellm raises a bare Exception
                    context = None
            self._budget = budget_for_context(context)
        return self._budget

    def summarize(self, text: str, cancel: threading.Event) -> Summary:
        if cancel.is_set():
            raise Cancelled
        if self.meter is not None:
            # Before litellm is imported (seconds of CPU): a run that finds the day's cap reached
            # pays nothing for it. Each request is checked again before it leaves.
            self.meter.before_call()
        self._check_credentials(litellm())  # imported on the caller's thread, before the loop uses it
        text = scrub(text)  # an older record may hold a secret: it is not sent to the provider

        def ask(content: str) -> Summary:
            if cancel.is_set():
                raise Cancelled
            return _run(lambda: self._ask(content), cancel)

        return summarize_in_parts(text, self.budget, ask, self.model)

    def _check_credentials(self, module: ModuleType) -> None:
        """Fail fast on a missing API key: litellm reports it as a server error, which would be retried."""
        try:
            found = module.validate_environment(model=self.model, api_base=self.api_base)
        except Exception:  # noqa: BLE001 - an unknown provider: let the call itself tell
            return
        missing = [key for key in found.get("missing_keys", []) if key.endswith("_KEY")]
        if missing:
            raise ModelRefused(
                f"missing credentials: {', '.join(missing)} is not set (in the environment or the env file); "
                "a local server that needs no key accepts any value"
            )

    async def _ask(self, content: str) -> Summary:
        from tenacity import (  # noqa: PLC0415 - only where a model is called
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential,
        )

        module = litellm()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.retry_wait, max=RETRY_WAIT_MAX_SECONDS),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )
        try:
            return await self._attempts(module, retrying, content)
        except (module.AuthenticationError, module.PermissionDeniedError, module.NotFoundError) as error:
            raise ModelRefused(describe_error(error)) from error

    async def _attempts(self, module: ModuleType, retrying: AsyncRetrying, content: str) -> Summary:
        async for attempt in retrying:
            with attempt:
                if self.meter is not None:
                    self.meter.before_call()
                messages = [
                    {"role": "system", "content": self._prompt.text},
                    {"role": "user", "content": content},
                ]
                try:
                    response = await module.acompletion(
                        model=self.model,
                        messages=messages,
                        api_base=self.api_base,
                        timeout=self.request_timeout,
                        max_tokens=self.max_output_tokens,
                        num_retries=0,
                        max_retries=0,
                        drop_params=True,
                    )
                except BaseException as error:
                    self._count_failed(module, error, messages)
                    raise
                return self._read(module, response)
        raise SummaryFailed("no attempt made")  # pragma: no cover - tenacity always attempts once

    def _count_failed(self, module: ModuleType, error: BaseException, messages: list[dict[str, str]]) -> None:
        """Count an attempt that brought no answer: it still counts against the caps.

        A request that timed out or was abandoned may have been processed (and billed) all the
        same, so it counts with the tokens it sent (Pi's estimate, characters / 4); one the
        server answered with an error counts as a call of no tokens.
        """
        if self.meter is None:
            return
        unanswered = isinstance(error, (module.Timeout, asyncio.CancelledError, TimeoutError))
        sent = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN if unanswered else 0
        self.meter.after_call(self.model, sent, 0, 0.0)

    def _read(self, module: ModuleType, response: ModelResponse) -> Summary:
        usage = getattr(response, "usage", None)
        input_tokens = usage_count(getattr(usage, "prompt_tokens", 0))
        output_tokens = usage_count(getattr(usage, "completion_tokens", 0))
        try:
            cost = usage_cost(module.completion_cost(completion_response=response) or 0.0)
        except Exception:  # noqa: BLE001 - no price known for this model: cost unknown, counted as 0
            cost = 0.0
        model = str(getattr(response, "model", None) or self.model)
        if self.meter is not None:
            self.meter.after_call(self.model, input_tokens, output_tokens, cost)
        choices = getattr(response, "choices", None) or []
        choice = choices[0] if choices else None
        message = getattr(choice, "message", None)
        answer = getattr(message, "content", None)
        if choice is not None and choice.finish_reason == "length":
            raise SummaryFailed(f"the summary was cut at {self.max_output_tokens} output tokens")
        # Against the whole node's input in the queue; here only what any answer must be.
        text = check_answer(answer if isinstance(answer, str) else "")
        # A model may still echo a secret it was given (redaction off, or a shape no rule knows).
        return Summary(scrub(text), model, input_tokens, output_tokens, calls=1, cost_usd=cost)

    def close(self) -> None:
        """Nothing to release: calls end with ``summarize``; the shared portal lives with the process."""
