"""Axioms: the day's telemetry (landing files or generated), scored into axioms, quality
check, publish to the ``synapse:axioms`` stream."""

from sentinel_platform.domains.axioms.assets import publish_axioms
from sentinel_platform.domains.axioms.definitions import defs

__all__ = ["defs", "publish_axioms"]
