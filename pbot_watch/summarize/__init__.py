"""Summaries of history nodes: the summarizers, their cache and usage, and the idle-time queue.

Import-light on purpose: nothing here imports litellm at module level (only
``litellm_model`` does, and only when a model is called).

* ``base``: what every summarizer is and is given, and how a summary is identified (pure).
* ``offline``: the deterministic summarizer that needs no model (the default).
* ``litellm_model``: summaries from a real model through litellm.
* ``prompts``: the summary prompt and its version.
* ``store``: the summary cache, daily usage and per-node failures.
* ``queue``: every pending node, lowest level first, one at a time.
* ``worker``: the idle-time worker the service calls, and the status it reports.
"""
