"""A stream's batch lane in the worker: past partitions' messages sent through the
provider's batch API at its lower price, each verdict still exactly once.

* :mod:`~workers.batchlane.runner`: the lane beside the live consumer (batch, or real
  time for an API without a batch lane), said once at start-up;
* :mod:`~workers.batchlane.lane`: the loop: gather, record, submit, poll, commit;
* :mod:`~workers.batchlane.verdicts`: what each message of a batch comes to;
* :mod:`~workers.batchlane.pacing`: when to submit and when to poll (pure);
* :mod:`~workers.batchlane.lease`, :mod:`~workers.batchlane.lane_keys`,
  :mod:`~workers.batchlane.stream_io`, :mod:`~workers.batchlane.requests`: the lane's
  lease, keys, stream and request bodies.
"""
