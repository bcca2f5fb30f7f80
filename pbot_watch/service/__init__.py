"""The live watcher service (``pbot-watch run``) and what ``pbot-watch status`` reads.

Modules, in the order data flows through them:

* ``watch``: watchdog observers on the session roots; events become "look at this path" items.
* ``snapshot``: reconcile scans and a pure diff of two scans (events can be lost).
* ``tail``: the ``Indexer`` with persisted cursors (``state``) and a bounded memory.
* ``resume_store``: each file's parsed state on disk, so a file dropped from memory resumes.
* ``schedule``: ``ReadSchedule``: when each changed file is read (debounce, back-off).
* ``catchup``: the start scan's catch-up (what is left to read, how fast), for status.
* ``idle``: the idle clock that runs and cancels the idle worker (summaries).
* ``run``: ``Service``: startup, the main loop, shutdown, signals.
* ``lock``, ``status``: one instance per user, and the status file's model.
* ``reporter``: ``StatusReporter``: builds and writes the status file, keeps the heartbeat;
  ``status_file``: reading it and judging whether the service runs (standard library only).
* ``allocator``: handing freed heap back to the system, and the allocator the service runs with.
* ``hooks``: the seams other parts plug into (record listeners, idle worker, status
  providers, companions), filled by ``pbot-watch run`` (``cli/run_parts.py``); ``listeners``: record listeners on a thread of their own.
* ``warm``: the warm query server beside the service (``pbot_watch.prefork``), a companion.
* ``install``: ``pbot-watch service install``: a systemd user unit or a launchd agent.

Importing this package imports nothing else: ``status`` must stay light.
"""
