"""The summary prompt, read from the package's ``prompts/`` folder, and its version.

The version is a hash of the prompt's text, so editing the prompt changes every cache key and
the next idle periods re-summarize with the new wording; nobody has to remember to bump it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

SUMMARY_PROMPT = "history-summary.md"


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    text: str

    @property
    def version(self) -> str:
        digest = hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:12]
        return f"{self.name.removesuffix('.md')}@{digest}"


@cache
def load_prompt(name: str = SUMMARY_PROMPT) -> Prompt:
    """The prompt shipped in the wheel (``pbot_watch/prompts/``, the repository's ``prompts/``)."""
    text = resources.files("pbot_watch").joinpath("prompts", name).read_text(encoding="utf-8")
    return Prompt(name, text.strip())
