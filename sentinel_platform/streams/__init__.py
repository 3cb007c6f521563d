"""The Redis Streams core, shared by the Dagster resources and the worker processes.

A library in five groups, imported one way (the layer test enforces it):
:mod:`~sentinel_platform.streams.plumbing` (connections, replies, scripts, key names),
:mod:`~sentinel_platform.streams.backlog` (a stream's backlog as the fleet sees it: lag,
zones, drain rate, holdings, retention), and the three sides that use them,
:mod:`~sentinel_platform.streams.consumer`, :mod:`~sentinel_platform.streams.producer` and
:mod:`~sentinel_platform.streams.operators`. Nothing here sets up a process (signals,
command lines, log handlers, a metrics endpoint): that is :mod:`workers.runtime`'s.
"""
