"""What the batch lane's tests send: a key in the provider's shape and transactions as the
model is shown them."""

from __future__ import annotations

KEY = "sk-proj-B4tch-K3y-0123456789abcdef"


def payloads(count: int) -> list[dict[str, object]]:
    """Transactions as the model is shown them, one with text that is not ASCII."""
    return [
        {"id": f"t-{n}", "amount": 100.0 + n, "currency": "EUR", "memo": f"loyer café n°{n}"}
        for n in range(count)
    ]
