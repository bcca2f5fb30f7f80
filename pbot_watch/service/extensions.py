"""Where the service's extensions are assembled; each part adds its own lines here.

``pbot-watch run`` calls ``build_extensions`` once at startup. The search index adds a
``RecordListener``, the summary engine an ``IdleWorker`` and a ``"summaries"`` status
provider (see ``pbot_watch.service.hooks`` for the contracts). Until they land, the service
runs with no listeners, an idle worker that does nothing, and a summaries section that only
names the configured model.
"""

from __future__ import annotations

from typing import Any

from pbot_watch.config import Settings
from pbot_watch.service.hooks import SUMMARIES, Extensions, ServiceContext


def build_extensions(context: ServiceContext) -> Extensions:
    settings: Settings = context.settings
    extensions = Extensions()

    def summaries() -> dict[str, Any]:
        return {"model": settings.model or "offline", "engine": "not installed"}

    extensions.status_providers[SUMMARIES] = summaries
    return extensions
