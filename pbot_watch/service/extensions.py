"""Where the service's extensions are assembled; each part adds its own lines here.

``pbot-watch run`` calls ``build_extensions`` once at startup. The search index adds a
``RecordListener``, the summary engine an ``IdleWorker`` and a ``"summaries"`` status
provider (see ``pbot_watch.service.hooks`` for the contracts).
"""

from __future__ import annotations


from pbot_watch.config import Settings
from pbot_watch.service.hooks import SUMMARIES, Extensions, ServiceContext


def build_extensions(context: ServiceContext) -> Extensions:
    settings: Settings = context.settings
    extensions = Extensions()

    # Summaries: the idle worker, the folders it learns from written records, and its status.
    from pbot_watch.summarize.worker import SummaryWorker  # noqa: PLC0415 - built only for `run`

    summaries = SummaryWorker(settings, records_lock=context.records_lock)
    extensions.listeners.append(summaries.on_record)
    extensions.idle_worker = summaries
    extensions.status_providers[SUMMARIES] = summaries.status
    return extensions
