"""Summaries of history nodes: the summarizers, their cache and usage, and the idle-time queue.

Import-light on purpose: nothing here imports litellm at module level (only
``litellm_model`` does, and only when a model is called).
"""
