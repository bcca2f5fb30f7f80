"""Where the service's extensions are assembled; each part adds its own lines here.

``pbot-watch run`` calls ``build_extensions`` once at startup. The search index adds a
``RecordListener``, raw memory an ``EntriesFollower``, the summary engine an ``IdleWorker`` and a ``"summaries"`` status
provider (see ``pbot_watch.service.hooks`` for the contracts).
"""

from __future__ import annotations

from pathlib import Path

from pbot_watch.memory.listener import MemoryFollower
from pbot_watch.search.held import HeldIndex
from pbot_watch.service.hooks import SUMMARIES, Extensions, ServiceContext


def build_extensions(context: ServiceContext) -> Extensions:
    settings = context.settings
    extensions = Extensions()

    # Search: keep the derived index current as records are written, so a query right after an
    # append finds it without refreshing first. Opened lazily on the listener thread (SQLite
    # connections stay on the thread that made them).
    extensions.listeners.append(SearchListener(settings.state_dir))
    # Raw memory: built and kept from the entries the service parses (memory/listener.py).
    memory = MemoryFollower(settings.state_dir)
    extensions.followers.append(memory)
    extensions.status_providers["memory"] = memory.status

    # Summaries: the idle worker, the folders it learns from written records, and its status.
    from pbot_watch.summarize.worker import SummaryWorker  # noqa: PLC0415 - built only for `run`

    summaries = SummaryWorker(settings, records_lock=context.records_lock)
    extensions.listeners.append(summaries.on_record)
    extensions.idle_worker = summaries
    extensions.status_providers[SUMMARIES] = summaries.status

    # The team index (optional, docs/team.md): records of allowed workspaces are pushed.
    if settings.team.enabled:
        from pbot_watch.team.start import team_listener  # noqa: PLC0415 - psycopg only when on

        team, team_status = team_listener(settings, context)
        if team is not None:
            extensions.listeners.append(team)
        extensions.status_providers["team"] = team_status
    return extensions


class SearchListener:
    """A ``RecordListener`` that re-indexes each written record in the search index."""

    def __init__(self, state_dir: Path) -> None:
        self.index = HeldIndex(state_dir)

    def __call__(self, record: Path, session_id: str) -> None:  # noqa: ARG002 - the listener's signature
        self.index.use(lambda index: index.update_record(record))
