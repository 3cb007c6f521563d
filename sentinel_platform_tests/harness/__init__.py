"""The one harness of the tests and the benchmarks (``bench/``).

Plain functions and classes, no pytest, so a bench script imports them as the tests do:

* :mod:`.waits`: :func:`~.waits.wait_until`, the one poll with a deadline;
* :mod:`.processes`: real worker processes (``python -m sentinel_platform.workers
  <stream>``, the command read from the stream registry), their environment, their JSON
  log lines, a :class:`~.processes.Fleet` that kills what is left, and readiness (the
  ``started`` log line and the lease);
* :mod:`.processors`: the processors a test or a bench plugs into a worker
  (``--processor sentinel_platform_tests.harness.processors:<factory>``);
* :mod:`.streams`: writing and reading the test streams;
* :mod:`.relay`: a switchable TCP relay standing in front of a failover;
* :mod:`.drills`: the fault drills' ledger producer and audit, and the Redis restart drill;
* :mod:`.analyzer_stub`: a real HTTP analyzer of capacity K and latency L that refuses
  (429 + ``Retry-After``) or queues beyond K, K changeable while it runs;
  :mod:`.analyzer_stub_process` serves it from a process of its own;
* :mod:`.spark_frames`: Spark DataFrames of valid transactions, as a publish asset has them;
* :mod:`.frozen_server`, :mod:`.prometheus`: a Redis server a test can freeze, a real
  Prometheus server;
* :mod:`.redis_cluster`, :mod:`.spark_standalone`: a real Redis Cluster and a Spark
  standalone cluster; :mod:`.postgres`: a throw-away PostgreSQL server;
* :mod:`.analyzer_server`, :mod:`.operations`, :mod:`.cli`, :mod:`.consumers`,
  :mod:`.platform`, :mod:`.domains`, :mod:`.sentinel_up`, :mod:`.dagster_cli`: the helpers
  of the fixtures below, which tests import as well (a test never imports a conftest.py).

The pytest side is apart: :mod:`.plugin` (loaded with ``-p`` from pyproject.toml's
``addopts``) registers the shared fixtures of :mod:`.fixtures` and the harness markers of
:mod:`.markers`. Importing the rest changes nothing in the environment (the plugin does: it
scrubs ``SENTINEL_*`` variables), so a bench can use it as it is.
"""
