"""A third stream, ``payments``, declared outside the platform through the registry.

:mod:`.payments` declares the stream (spec, wire model, processor) and is what
``SENTINEL_STREAM_MODULES`` names, so every process (workers, ``sentinel``, the code
location, Spark's executors) imports it; :mod:`.location` adds its Dagster source asset
and publish job to the code location.
"""
