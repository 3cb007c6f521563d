"""The worker process, whole: entry point, command line, process set-up and processors.

Everything that makes one worker *process* lives in this one package, so the streams core
(:mod:`sentinel_platform.streams`) stays a library: it knows nothing of signals, command
lines, log set-up or a metrics endpoint.

* :mod:`workers.cli`: the command line (:func:`workers.cli.main`, :func:`workers.cli.run_worker`),
  every stream's options read off its :class:`~sentinel_platform.registry.StreamSpec`.
* :mod:`workers.runtime`: wiring one process (:func:`workers.runtime.run`): settings, JSON
  logs, signals, the processor, the metrics endpoint, Redis, then the consumer loop;
  :mod:`workers.startup`: what it and the batch lane's process both start from.
* :mod:`workers.processors`: what a message means (one processor per built-in stream),
  with the analyzer client (the package :mod:`workers.analyzer`: its HTTP client, circuit
  breaker and the limits shared by the fleet).
* :mod:`workers.rescreening`: the stream's re-screen queue, consumed beside it by every
  worker with an analyzer: provisional rules fallbacks decided again by the model, after
  live traffic.
* :mod:`workers.batchlane`: the stream's batch lane, beside it in every worker: past
  partitions' messages sent through the provider's batch API by the worker holding the
  lane's lease, each verdict exactly once (real time for an API without a batch lane).
* :mod:`workers.watch_transactions`, :mod:`workers.watch_axioms`: the historical commands,
  each the same worker as ``python -m sentinel_platform.workers <stream>``.

Why here rather than under :mod:`sentinel_platform`: the design names this package as the
workers' home, and it sits beside the ``sentinel`` command as an entry point that imports
only the streams core and the foundation (the layer test enforces it), never Dagster.
``python -m sentinel_platform.workers <stream>`` stays the documented spelling (``sentinel
up``, supervisors and alerts launch it); that package is an alias of :func:`workers.cli.main`
with no code of its own.
"""
