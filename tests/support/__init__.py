"""Real helpers for tests: servers and files that stand in for the outside world, never for our code."""
