"""Sentinel Platform: Spark assets publish to Redis Streams; self-healing workers consume them."""

__version__ = "0.1.0"
