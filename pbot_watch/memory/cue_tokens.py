"""What the cue block costs a request, in tokens: counted, not guessed from its length.

The cues are paid for in every request after a compaction, so their budget is in the unit the
request pays. Pi estimates tokens as characters / 4; on cue lines (paths, hex ids, symbols)
that is off by a factor of up to two either way (base64 runs at two characters a token).
The tokenizer counted with is the Anthropic one litellm ships in its wheel
(``litellm_core_utils/tokenizers/anthropic_tokenizer.json``), loaded with the ``tokenizers``
package. The file is found without importing litellm (a second of imports the cues need not
pay): ``importlib.util.find_spec`` only locates the package. It loads in about 0.1 s, once per
process. Where either is missing, Pi's estimate stands in, and ``counter_name`` says so.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pbot_watch.history.jstext import utf16_len

if TYPE_CHECKING:
    from tokenizers import Tokenizer

CHARS_PER_TOKEN = 4
"""Pi's estimate for compaction: UTF-16 length / 4, rounded up."""
TOKENIZER_FILE = ("litellm_core_utils", "tokenizers", "anthropic_tokenizer.json")

TokenCounter = Callable[[Sequence[str]], list[int]]
"""Tokens of each of several texts."""


def pi_estimate(text: str) -> int:
    """Pi's estimate: UTF-16 length / ``CHARS_PER_TOKEN``, rounded up."""
    return math.ceil(utf16_len(text) / CHARS_PER_TOKEN)


def count_by_chars(texts: Sequence[str]) -> list[int]:
    """Pi's estimate of each text (the fallback counter)."""
    return [pi_estimate(text) for text in texts]


def tokenizer_file() -> Path | None:
    """Where litellm's wheel keeps the Anthropic tokenizer, without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder).joinpath(*TOKENIZER_FILE)
        if path.is_file():
            return path
    return None


@functools.cache
def _tokenizer() -> Tokenizer | None:
    path = tokenizer_file()
    if path is None:
        return None
    try:
        from tokenizers import Tokenizer  # noqa: PLC0415 - only the cues pay for it

        return Tokenizer.from_file(str(path))
    except Exception:  # noqa: BLE001 - a missing or unreadable tokenizer means counting by characters
        return None


def count_tokens(texts: Sequence[str]) -> list[int]:
    """Tokens of each text with the shipped tokenizer (Pi's estimate when it is missing)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return count_by_chars(texts)
    if not texts:
        return []
    try:
        encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    except TypeError:
        # A lone surrogate (a session line's ``\ud800`` escape, kept as JavaScript keeps it):
        # the tokenizer takes UTF-8 only, and one such line must not cost the whole block.
        encodings = tokenizer.encode_batch([_well_formed(text) for text in texts], add_special_tokens=False)
    return [len(encoding.ids) for encoding in encodings]


def _well_formed(text: str) -> str:
    """``text`` with each lone surrogate's bytes as U+FFFD (as a UTF-8 decoder shows them)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def counter_name() -> str:
    """Which counter ``count_tokens`` uses, for reports."""
    return "anthropic tokenizer (litellm)" if _tokenizer() is not None else "characters / 4"
