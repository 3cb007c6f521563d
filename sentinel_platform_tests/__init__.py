"""The test suite. Its folders mirror the code they test; markers say how a test runs.

Where a test lives:

* a module of ``sentinel_platform`` (``sentinel_platform/<path>/<module>.py``) is tested
  under ``sentinel_platform_tests/<path>/``: ``streams/consumer/`` (its rooms too:
  ``streams/consumer/healing/``, ...), ``streams/backlog/``,
  ``domains/operations/``, ``cli/``, ...; its top-level modules (``settings``,
  ``schemas``, ``redis_server``, ``registry``, ``redaction``, ``definitions``, ...) right
  here;
* ``sentinel_platform_tests/workers/`` holds the tests of both worker packages, whose
  module names do not clash: the worker process's entry point ``sentinel_platform.workers``
  (``python -m sentinel_platform.workers <stream>``: start-up, stop, exit codes) and the
  top-level ``workers`` package (the analyzer client, its circuit breaker and fleet limits,
  the ``watch_*`` shims); the domain processors of ``workers/processors/`` are tested under
  ``sentinel_platform_tests/workers/processors/``;
* ``bench/`` and the shipped ``deploy/`` files are tested under ``bench/`` and ``deploy/``;
* the suite's own harness under ``harness/`` (its fixtures' own checks sit beside it).

A test goes where the module whose promise it checks lives, however it runs: in-process,
with real worker processes, against a Redis Cluster or a Spark standalone cluster. How it
runs is said by its markers (``spark``, ``dagster``, ``processes``, ``redis``, set at
collection by :mod:`.harness.markers`; ``slow`` and ``cluster`` set by the module), and
runs are selected by them: ``make test-fast``, ``make test-cluster``, CI's second-server
pass. Two tests of one module that would share a file name are named by their subject
(``streams/consumer/settling/test_idempotency.py`` and ``test_idempotent_effects.py``).

Fixtures shared between folders are registered by the suite's plugin
(:mod:`.harness.plugin`); a test module never imports a conftest (``test_suite_layout``).
"""
