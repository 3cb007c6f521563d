"""What an analyzer's answer means, read from the answer alone: a verdict, busy (and for how
long), exhausted, down or wrong (:mod:`~workers.analyzer.answers.replies`,
:mod:`~workers.analyzer.answers.refusals`, :mod:`~workers.analyzer.answers.waits`), the
tokens it billed with or without a verdict (:mod:`~workers.analyzer.answers.billed`), the
budgets it announced (:mod:`~workers.analyzer.answers.announced_limits`), and what a spell of
busy answers adds up to (:mod:`~workers.analyzer.answers.busy_spell`). Pure, but for the
clock: every documented answer is a row of a table test."""
