"""Healing: what keeps the fleet whole whatever happens to one worker.

It decides who is alive and whose messages may be taken. A worker holds a lease that its
heartbeat thread refreshes (``lease``), with the side writes beside the refresh, never able
to hold it up (``heartbeat_writes``); a worker restarted under its killed predecessor's
name takes the lease at once (``lease_takeover``). Each worker keeps a registered
connection of its own (``link``), so the others know it dead as soon as its socket closes
(``liveness``). Every worker recovers dead workers' messages and its own failures, never a
live worker's (``recovery``), and after an outage waits one lease TTL before it takes
anyone else's (``recovery_grace``). A worker stuck on one message gives itself up
(``watchdog``).

The lowest room: it imports only the consumer's shared ground (the processor contract,
outcomes, metrics), and every other room may import it.
"""
