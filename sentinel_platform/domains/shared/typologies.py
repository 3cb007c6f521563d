"""The generated transactions' population: ordinary merchants and labelled typologies.

Each :class:`Profile` is one kind of row with its share of the day (``weight`` per mille),
its ground truth (``is_threat``) and its ``typology``. The typologies are chosen so that a
measurement of verdicts against the truth has cases both ways, judged by the rules'
defaults (``SENTINEL_HIGH_RISK_AMOUNT`` 400):

==================  =========  ========  ===================================================
typology            is_threat  per mille  the rules
==================  =========  ========  ===================================================
structuring         true       8         catch it: USD 495.00-499.99, an ordinary message
scam_story          true       6         miss it: a scam told without the rules' keywords
impossible_pair     true       6         miss it: a corner shop booking currency exchange
keyword_harmless    false      10        flag it: a threat word in a harmless forex payment
round_payroll       false      10        flag it: a round salary above the risk amount
ordinary            false      960       the simulator's merchants (forex above 400 flagged)
==================  =========  ========  ===================================================

So the threats are 2% of a day (:func:`base_rate`). The table is pure data: the Spark
generator (:func:`~sentinel_platform.domains.shared.generation.generate_transactions`)
turns it into column expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

from sentinel_platform.aml_rules import STRUCTURING_CURRENCY, STRUCTURING_HIGH, STRUCTURING_LOW

ORDINARY = "ordinary"


@dataclass(frozen=True)
class Profile:
    """One kind of generated row. Amounts are uniform in ``[low, high]`` to the cent, or,
    with ``step``, the multiples of ``step`` from ``low`` up to ``high``."""

    merchant: str
    weight: int
    category: str
    currencies: tuple[str, ...]
    low: float
    high: float
    messages: tuple[str, ...]
    is_threat: bool = False
    typology: str = ORDINARY
    step: float | None = None

    def amounts(self) -> int:
        """How many amounts a stepped profile draws from (``low``, ``low + step``, ...)."""
        if self.step is None:
            raise ValueError(f"{self.typology} draws amounts to the cent, not in steps")
        return round((self.high - self.low) / self.step) + 1


ORDINARY_PROFILES: tuple[Profile, ...] = (
    Profile(
        "Costco Wholesale",
        524,
        "retail",
        ("USD",),
        25.00,
        380.00,
        ("Bulk household supplies", "Weekly groceries", "Gas station fill-up", "Tire service"),
    ),
    Profile(
        "Kim's Convenience",
        349,
        "grocery",
        ("USD", "CAD"),
        2.50,
        65.00,
        ("Snacks and drinks", "Milk and bread", "Coffee and a paper", "Phone top-up"),
    ),
    Profile(
        "Pacific Forex",
        87,
        "forex",
        ("EUR", "GBP", "JPY", "CAD", "AUD"),
        150.00,
        2500.00,
        ("Currency exchange at counter", "Travel money order", "FX settlement"),
    ),
)

TYPOLOGIES: tuple[Profile, ...] = (
    Profile(
        "PayQuick Transfers",
        8,
        "other",
        (STRUCTURING_CURRENCY,),
        STRUCTURING_LOW,
        STRUCTURING_HIGH,
        ("Rent share", "Invoice settlement", "Family support"),
        is_threat=True,
        typology="structuring",
    ),
    Profile(
        "Northwind Payments",
        6,
        "other",
        ("USD",),
        120.01,
        380.00,
        (
            "Fee the bank's security team asked for to unfreeze my account",
            "Release fee for a prize from a draw I never entered",
            "Savings for the man I met online so he can fly home to me",
            "The tax office caller said pay today or be arrested",
        ),
        is_threat=True,
        typology="scam_story",
    ),
    Profile(
        "Kim's Convenience",
        6,
        "forex",
        ("USD", "CAD"),
        120.00,
        195.00,
        ("FX settlement", "Currency exchange at counter"),
        is_threat=True,
        typology="impossible_pair",
    ),
    Profile(
        "Pacific Forex",
        10,
        "forex",
        ("EUR", "GBP"),
        210.00,
        390.00,
        (
            "Wire transfer of tuition to my son's university",
            "Travel money needed asap, flight tonight",
            "Wire for the house deposit, paperwork with the bank",
        ),
        typology="keyword_harmless",
    ),
    Profile(
        "Acme Payroll Services",
        10,
        "other",
        ("USD",),
        1000.00,
        5000.00,
        ("Monthly salary", "Payroll run", "Contractor payout"),
        typology="round_payroll",
        step=250.00,
    ),
)

PROFILES: tuple[Profile, ...] = ORDINARY_PROFILES + TYPOLOGIES


def base_rate(profiles: tuple[Profile, ...] = PROFILES) -> float:
    """The expected share of threats among the rows the profiles generate."""
    total = sum(p.weight for p in profiles)
    return sum(p.weight for p in profiles if p.is_threat) / total
