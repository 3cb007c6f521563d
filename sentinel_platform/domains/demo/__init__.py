"""The demo flow: a small generated batch every few minutes, so a fresh install looks alive."""

from sentinel_platform.domains.demo.definitions import defs

__all__ = ["defs"]
