"""Pi session files in, entries out. Pure: nothing here opens a file."""
