"""Axioms: the day's telemetry (landing files or generated), scored into axioms, quality
check, publish to the ``synapse:axioms`` stream."""

from sentinel_platform.domains.axioms.definitions import defs
from sentinel_platform.domains.axioms.jobs import publish_axioms

__all__ = ["defs", "publish_axioms"]
