"""The worker processes' entry point: ``python -m sentinel_platform.workers <stream>``.

One entry point for every declared stream (see :mod:`sentinel_platform.registry`); the
domain processors live in the top-level ``workers`` package and are loaded by name.
"""
