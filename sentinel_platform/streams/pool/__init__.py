"""The pool's shared state in Redis: lag, its zones, the drain rate, progress, peaks and
retention. Written by the workers, read by the producer and the operators; imports only
``streams.plumbing``.
"""
