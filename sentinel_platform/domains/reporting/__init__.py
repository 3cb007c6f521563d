"""Reporting: the workers' result streams read back into Spark and summarised."""

from sentinel_platform.domains.reporting.definitions import defs

__all__ = ["defs"]
