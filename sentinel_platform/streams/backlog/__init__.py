"""A stream's backlog as the whole fleet of workers sees it, shared in Redis: lag, its
zones, the drain rate, progress, peaks, what the workers hold, entry ages and retention.
Written by the workers, read by the producer and the operators; imports only
``streams.plumbing``.

Named for what it measures (the work waiting on a stream) rather than "pool", which in
this project means one thing only: a Dagster concurrency pool.
"""
