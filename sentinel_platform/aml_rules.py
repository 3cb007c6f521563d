"""AML signals shared by the Spark pre-score and the transaction workers' verdict rules.

The enrichment asset scores transactions before they are published and the workers judge
them after; both must mean the same thing by "structuring" or "a threat keyword", so the
definitions live here once.
"""

from __future__ import annotations

#: Amounts just under a USD 500 reporting threshold: the generator's structuring typology.
STRUCTURING_LOW, STRUCTURING_HIGH = 495.00, 499.99
STRUCTURING_CURRENCY = "USD"

#: Words that mark urgency, untraceable value transfer or pressure (case-insensitive,
#: whole words). A plain regular expression so both Python ``re`` and Spark ``rlike`` use it.
THREAT_KEYWORDS_PATTERN = (
    r"\b(urgent|asap|wire|gift ?cards?|crypto\w*|bitcoin|btc|usdt|western union|moneygram"
    r"|offshore|untraceable|cash only|no questions)\b"
)
