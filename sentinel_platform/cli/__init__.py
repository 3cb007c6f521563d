"""The ``sentinel`` operator command: ``up``, ``status``, ``dlq``."""
