"""The derived search index over the archive (and over raw Pi sessions), and its queries.

Nothing here is a source of truth: every table can be rebuilt from the record files and the
session files alone. Importing this package must stay light (no litellm, no watchdog).
"""
