"""Calling: the processor calls a worker has in flight, how many, and for which messages.

It decides when and how a message due for its call meets the processor. ``in_flight``
(``Calls``) runs the calls on threads, at most the limit at once, and parks a message whose
downstream is busy; ``adaptive_limit`` finds that limit at run time (or keeps a pinned one);
``intake`` decides, from tables, how long a run of calls is, how far a worker reads ahead
and how much room it has; ``processor_call`` turns one call into an outcome (a commit, a
dead letter, a failure; ``Busy`` passes through); ``claims`` makes one paid call per
natural key across the fleet, a copy on another worker waiting for the claimant's commit.

It may import the healing room (the hang watchdog's hand) and the consumer's shared
ground; the settling and reading rooms stand on it.
"""
