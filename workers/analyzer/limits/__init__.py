"""The limits a fleet of workers shares for one analyzer, kept in Redis so every worker sees
them at once: the hold and the optional call rate
(:mod:`~workers.analyzer.limits.fleet_limits`), the token budget with its daily cap
(:mod:`~workers.analyzer.limits.token_budget`), announced budgets read as token buckets
(:mod:`~workers.analyzer.limits.announced_bucket`) and the one first call while the fleet
knows none of them (:mod:`~workers.analyzer.limits.first_call`)."""
