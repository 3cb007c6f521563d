"""The Redis Streams core, shared by the Dagster resources and the worker processes.

One module per idea: key naming (``keys``), connecting (``connection``), and, as they
land, the consumer loop, recovery, dead letters, lag and publishing with backpressure.
"""
