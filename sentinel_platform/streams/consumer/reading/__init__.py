"""Reading: what a worker reads, and what each message of a batch needs before any call.

It decides what enters the worker and what becomes of a message before the processor sees
it. ``group_read`` sends ``XREADGROUP >`` once, on a connection of its own, and knows a
read whose reply was lost; ``lost_read`` takes that read's batch back from the PEL as first
deliveries; ``triage`` decides each message in at most two round trips: acknowledged
(dead-lettered or committed before), dead-lettered at once (undecodable, too old, past the
delivery limit, invalid), a failure (the parser broke), or due for its call (its key
claimed first, for paid calls); ``entry_age`` decides when an entry is too old to apply.

The triage decides with the settling's records (dead letters, markers, attempts) and the
calling's claims, so this room stands on both: it may import the settling, calling and
healing rooms and the consumer's shared ground.
"""
