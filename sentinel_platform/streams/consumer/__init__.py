"""The worker side: the consumer loop and everything it needs to heal the fleet, commit
exactly once and dead-letter. A library: the process around it (command line, signals,
log set-up, metrics endpoint) is :mod:`workers.runtime`'s. Only the worker processes
(:mod:`workers`) import it; the Dagster code and the CLI may not (the layer test enforces
it).
"""
