"""The worker side: the consumer loop and everything it needs to heal the fleet, commit
exactly once and dead-letter. A library: the process around it (command line, signals,
log set-up, metrics endpoint) is :mod:`workers.runtime`'s. Only the worker processes
(:mod:`workers`) import it; the Dagster code and the CLI may not (the layer test enforces
it).

Its modules live in rooms, one sub-package per phase, each saying in its own docstring
what it decides. A message meets them in this order: ``reading`` (the group read, a lost
read, the triage before any call), ``calling`` (the calls in flight, their limit, how much
a worker takes, the paid-call claims), ``settling`` (the outbox: commits, dead letters,
attempt records; the lag and holding it publishes), and ``stopping`` (a stop within one
deadline); ``healing`` (leases, liveness, recovery, the hang watchdog) keeps the fleet
whole around all of them.

Imports go one way, lowest first: ``healing``, ``calling``, ``settling``, ``reading``,
``stopping``. A room may import only the rooms below it and the shared ground. The order is
not the message's: the triage decides with the settling's records and the calling's
claims, so the reading room stands on both, and every room stands on healing.

The shared ground is the modules at this top level that any room may import and that
import no room: ``processor`` (the contract with a domain processor and the checks of what
it hands back), ``outcomes`` (a delivery and what is decided for it), ``metrics`` and
``token_metrics``, ``redis_errors`` and ``outages`` (one policy for what Redis does to a
worker) and ``group`` (creating the consumer group). Above the rooms stand ``loop``
(``Consumer``: one pass ties the rooms together) and ``parts`` (builds them, in dependency
order); no room imports them. The layer test holds all of this (``CONSUMER_ROOMS``) and
finds no import circle inside the consumer.
"""
