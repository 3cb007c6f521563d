"""Stopping: a worker's stop, within one deadline whatever Redis does.

It decides what a stop finishes, hands back or gives up, and when the process must end.
``wind_down`` (``Stopping``) finishes what the consumer holds: the calls in progress may
finish, the rest is handed back, the outcomes are settled and the group is left; it reads
the consumer through its own protocol, ``StoppableConsumer``, never through the loop.
``deadline`` holds the stop's one budget, a Redis client whose every wait ends by it, and
the backstop that ends the process past the bound. ``startup_wait`` lets the worker's
start-up give up a Redis call that a stop must not wait out.

The top room: it may import every room below it and the consumer's shared ground; only
the loop and the worker's start-up import it.
"""
