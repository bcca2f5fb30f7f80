"""Warm query processes: a query command forked from a process that has already imported it.

A query command (``search``, ``read``, ``memory search``, ``recall``) run by a script or an
agent is a whole process per call, and nine tenths of it is start-up: the interpreter, click,
pydantic and the query's modules (``docs/search.md``). While the service runs, it keeps one
process that has imported all of that and does nothing else (``server``); the ``pbot-watch``
script (``client``) hands it the command line, the working folder, the environment and its
own standard streams (the descriptors themselves, over a Unix socket), and the server forks a
child that becomes the command: the same code on the caller's streams, folder and environment,
as a fresh process would be, without importing anything. The caller waits for the child's exit
status and exits with it; Ctrl-C and SIGTERM are passed on.

This is the preloader of Android's zygote and of Ruby's Spring: fork from a process frozen
after its imports (``gc.freeze``, so the children share its pages). Nothing of a query is kept
between calls (each child opens the index itself), so a forked query answers exactly as one
in a process of its own; when no server answers (no service, another installation, another
Python, the code changed on disk), the script runs the command in itself, as before.

``wire`` holds what both sides share (the socket, the messages) with the standard library only.
"""
