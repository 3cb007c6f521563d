"""The Redis plumbing every side shares: connecting, typed replies, Lua scripts, key names,
retries and the server's eviction policy. Imports nothing else of ``streams``.
"""
