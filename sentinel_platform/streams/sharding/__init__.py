"""A logical stream over N shards on a Redis Cluster: where each shard lives, and which
shard a row goes to.

A Redis stream is one key, so it lives in one hash slot on one master and uses one core.
A sharded stream is N whole streams, each with every key of its own (group, dead letters,
markers, leases, lag) under one hash tag per shard, so each shard keeps every promise of
a single stream in its own slot. This group decides the two facts every side must agree
on, as pure functions over what the cluster reports:

* :mod:`.placement`: one hash tag per shard, chosen from ``CLUSTER SHARDS`` so the shards
  land on distinct masters (random tags share a master most of the time);
* :mod:`.routing`: the shard of a row, from its natural key, computed alike in Python and
  in Spark's JVM, so copies of one key always meet on one shard;
* :mod:`.record`: the tags chosen once and recorded in Redis, so every process names the
  same keys, before and after a resharding;
* :mod:`.shards`: the keys of every shard of a declared stream (one shard: the stream's
  own keys, byte for byte).

Of the platform it imports only the plumbing's key names (``plumbing.keys.shard_keys``);
``record`` takes any redis-py client. The workers, the producer (routing each row to its
shard) and the operators' tools build on it. The design and what is
built so far are in docs/scaling.md.
"""
