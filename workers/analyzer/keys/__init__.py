"""The key a worker calls with: read again when its file changes
(:mod:`~workers.analyzer.keys.key_source`), held alone when the API rejects it
(:mod:`~workers.analyzer.keys.key_holds`), and shown only as the providers show it,
``sk-...abcd`` (:mod:`~workers.analyzer.keys.key_fingerprint`)."""
