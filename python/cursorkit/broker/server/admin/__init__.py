"""The broker's HTTP side: Pulsar's admin REST v2 paths and Prometheus ``/metrics`` (aiohttp).

Served on the broker's own event loop (``cursorkit broker --http-port``): ``http_server.py`` runs
it, ``routes.py`` gathers each module's routes, ``errors.py`` answers failures as Pulsar does
(``{"reason": ...}``), ``topic_paths.py`` reads the tenant, namespace and topic of a path.
"""
