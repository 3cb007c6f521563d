"""What the data domains share: partitions, landing, generation, executor, resources, GX."""

from sentinel_platform.domains.shared.definitions import defs

__all__ = ["defs"]
