"""Re-screening: the model decides again what the rules decided while it could not be asked.

A rules fallback made because the analyzer was down, its breaker open, the fleet held,
the provider exhausted or the daily budget spent is *provisional*, and its commit puts the
message in its stream's re-screen queue (:mod:`workers.processors.provisional`,
:mod:`sentinel_platform.streams.backlog.provisional`). Every worker with an analyzer also
consumes that queue, beside its stream, with the same consumer machinery:

* :mod:`workers.rescreening.queue_keys`: the queue as a stream of its own (its group,
  its markers, its leases), whose results are the stream's results;
* :mod:`workers.rescreening.processor`: asks the model only, and writes its verdict as
  one superseding the provisional one (``rescreen_of``);
* :mod:`workers.rescreening.gate`: never ahead of live traffic, never while the analyzer
  is held or its breaker open;
* :mod:`workers.rescreening.runner`: the queue's consumer on a thread owned beside the
  stream's.
"""
