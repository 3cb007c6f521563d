"""Transactions: the day's source (landing files or generated), enrichment, quality check,
publish to the ``transactions`` stream."""

from sentinel_platform.domains.transactions.assets import publish_transactions
from sentinel_platform.domains.transactions.definitions import defs

__all__ = ["defs", "publish_transactions"]
