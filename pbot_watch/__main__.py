"""``python -m pbot_watch``: the same command line as the ``pbot-watch`` script.

The installed service falls back to ``<python> -P -m pbot_watch run`` where no console script
sits beside the interpreter. A query goes to the service's warm server first (``prefork``).
"""

from pbot_watch.prefork.client import main

if __name__ == "__main__":
    main()
