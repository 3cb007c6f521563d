"""Transactions: the day's source (landing files or generated), enrichment, quality check,
publish to the ``transactions`` stream."""

from sentinel_platform.domains.transactions.definitions import defs
from sentinel_platform.domains.transactions.jobs import publish_transactions

__all__ = ["defs", "publish_transactions"]
