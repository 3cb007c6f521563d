"""Settling: every decided outcome written to Redis exactly once, and what a worker
publishes beside its work.

It decides how an outcome reaches Redis so that nothing is lost or applied twice.
``outbox`` buffers the outcomes and sends them in one pipeline: commits (effect, marker
and XACK in one script: ``idempotency``), dead letters (payload and XACK in one script:
``dead_letter``), error records (``attempts``: how often a redelivered message really met
the processor), acknowledgements, and a stop's hand-back. ``lag_and_holding`` writes the
lag key, the peaks record and this worker's holding, from the loop and from the
heartbeat's side writes.

It may import the calling room (the claims a commit releases, the calls' holding and
limit it publishes), the healing room and the consumer's shared ground; the reading room
stands on it (the triage looks up dead letters, markers and attempts before any call).
"""
