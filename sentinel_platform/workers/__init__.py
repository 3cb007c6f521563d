"""``python -m sentinel_platform.workers <stream>``: an alias of :func:`workers.cli.main`.

The spelling ``sentinel up``, supervisors and alert texts launch a worker with; the worker
itself (command line, process set-up, processors) lives in the :mod:`workers` package.
"""
