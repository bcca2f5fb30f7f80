"""``python -m pbot_watch``: the same command line as the ``pbot-watch`` script.

The installed service falls back to ``<python> -P -m pbot_watch run`` where no console script
sits beside the interpreter.
"""

from pbot_watch.cli import run

if __name__ == "__main__":
    run()
