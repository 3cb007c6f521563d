"""The worker side: the consumer loop and everything it needs to heal the pool, commit
exactly once and dead-letter. Only the worker processes (``workers/``) import it; the
Dagster code and the CLI may not (the layer test enforces it).
"""
