"""The real Pi CLI for the end-to-end tests: the ``pi_install`` fixture lives in tests/conftest.py,
shared with the personal-bot parity oracle, so both use one cached install."""
