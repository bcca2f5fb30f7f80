"""pbot-watch inside Pi: installing the Pi package, and the child process its extension talks to.

The package itself (``pbot_watch/pi_package``: ``package.json`` and one TypeScript extension)
is UI and wiring only. Everything it shows comes from one long-lived ``pbot-watch pi serve``
child per Pi process, over a small JSON-lines protocol, so the logic lives here, in Python,
where it is tested.

* ``protocol``: the two formats shared with the extension (its config file, the JSON lines).
* ``serve``: the child: ``PiExtensionServer`` answers the extension's requests.
* ``ahead``: the raw memory of the sessions the child works in, built between requests.
* ``footer``: the footer status Pi shows for pbot-watch.
* ``install``: copies the package to a per-user folder, writes beside it how to start this
  pbot-watch and the tools' definitions, and runs Pi's own ``pi install``.
"""
