"""The Dagster code, one package per domain, each exposing ``defs() -> dg.Definitions``.

``transactions`` and ``axioms`` build and publish the data, ``reporting`` reads the
workers' results back, ``rescreening`` queues a day's provisional verdicts for the model
again, ``operations`` watches and gates the streams, ``demo`` feeds a fresh install;
``shared`` holds the Spark code the data domains have in common.
``sentinel_platform.definitions`` merges them into the code location.
"""
