"""Domain processors: what a message means, separate from how it is delivered.

The consumer loop in :mod:`sentinel_platform.streams` handles delivery; these classes
implement its :class:`~sentinel_platform.streams.consumer.processor.Processor` protocol.
"""

from workers.processors.axioms import AxiomProcessor
from workers.processors.transactions import TransactionProcessor

__all__ = ["AxiomProcessor", "TransactionProcessor"]
