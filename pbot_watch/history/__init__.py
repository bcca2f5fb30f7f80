"""Entries in, records out: branches, exchanges and the 4-ary node tree. Pure, no I/O."""
