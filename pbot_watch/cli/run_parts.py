"""The parts ``pbot-watch run`` assembles the service from; each part adds its own lines here.

This is the edge, above every part it names: the service (``pbot_watch.service``) knows only the
contracts of ``pbot_watch.service.hooks``, never the parts, so the team pusher, which is built on
those contracts, can join without the service importing it. ``run`` calls ``build_extensions``
once at startup. The search index adds a ``RecordListener``, raw memory an ``EntriesFollower``,
the summary engine an ``IdleWorker`` and a ``"summaries"`` status provider, the warm query
server a ``Companion`` and a ``"warm_queries"`` status provider, the team index (when on) a
``RecordListener`` and a ``"team"`` status provider.
"""

from __future__ import annotations

from pbot_watch.archive.fresh import FreshRecords
from pbot_watch.memory.cue_listener import CueLedgerFollower
from pbot_watch.memory.listener import BUILD_FROM, MemoryFollower
from pbot_watch.search.listener import SearchListener
from pbot_watch.service.hooks import SUMMARIES, Extensions, ServiceContext
from pbot_watch.service.warm import WarmServer


def build_extensions(context: ServiceContext) -> Extensions:
    settings = context.settings
    extensions = Extensions()

    # Search: keep the derived index current as records are written (search/listener.py),
    # from the writes the service hands over with what changed in them (archive/fresh.py).
    context.fresh = FreshRecords()
    extensions.listeners.append(SearchListener(settings.state_dir, context.fresh))
    # Raw memory: built and kept from the entries the service parses (memory/listener.py),
    # whole files on the second core (memory/build.py).
    memory = MemoryFollower(settings.state_dir, build_from=BUILD_FROM)
    extensions.followers.append(memory)
    extensions.status_providers["memory"] = memory.status
    # Cue ledgers of marathon sessions, kept from the same entries and saved for the Pi child
    # (memory/cue_listener.py): its first cues of a session the service read load them.
    cue_ledgers = CueLedgerFollower(settings.state_dir)
    extensions.followers.append(cue_ledgers)
    extensions.status_providers["cue_ledgers"] = cue_ledgers.status

    # Warm queries: a server that has imported the query commands forks one per query
    # (prefork/, service/warm.py), so a script's or an agent's query skips the start-up.
    warm = WarmServer(settings.state_dir, settings.log_level)
    extensions.companions.append(warm)
    extensions.status_providers["warm_queries"] = warm.status

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
