"""Re-screening: a day's provisional verdicts queued for the model again, from the UI."""

from sentinel_platform.domains.rescreening.definitions import defs

__all__ = ["defs"]
