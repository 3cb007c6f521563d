"""Worker entry points: ``python -m workers.watch_transactions`` / ``workers.watch_axioms``.

Each entry point is a thin shell over ``sentinel_platform.streams`` plus its domain
processor; the consumer machinery itself lives once, in the streams core.
"""
