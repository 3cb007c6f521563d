"""What may be shown of a key: the providers' own fingerprint (a documented prefix and the
last four characters of a long key, never more) and a short digest, from a table."""

from __future__ import annotations

import hashlib

import pytest

from workers.analyzer.keys.key_fingerprint import NO_KEY, fingerprint, key_digest

LONG = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"  # 28 characters of secret


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        (f"sk-proj-{LONG}wxyz", "sk-proj-...wxyz"),  # OpenAI project key
        (f"sk-{LONG}abcd", "sk-...abcd"),  # OpenAI legacy key, as its console shows it
        (f"sk-svcacct-{LONG}9876", "sk-svcacct-...9876"),
        (f"sk-ant-api03-{LONG}-AA_Q", "sk-ant-api03-...AA_Q"),  # Anthropic's
        (f"sk-or-v1-{LONG}0f0f", "sk-or-v1-...0f0f"),  # OpenRouter's
        (f"AIzaSy{LONG}Zz-9", "AIzaSy...Zz-9"),  # Google's
        (f"{LONG}dead", "...dead"),  # no known prefix: none shown
        ("vllm-token-0123456789abcdefXYZW", "...XYZW"),  # a prefix not documented: hidden
        ("sk-short-key-1", "sk-..."),  # too short to show its end
        ("s3cr3t", "..."),
        ("", NO_KEY),
    ],
)
def test_a_fingerprint_shows_a_documented_prefix_and_the_end_of_a_long_key(
    key: str, shown: str
) -> None:
    assert fingerprint(key) == shown


@pytest.mark.parametrize("key", [f"sk-proj-{LONG}wxyz", f"sk-ant-api03-{LONG}-AA_Q", "s3cr3t"])
def test_a_fingerprint_shows_at_most_four_characters_beyond_the_public_prefix(key: str) -> None:
    shown = fingerprint(key)
    prefix, _, tail = shown.partition("...")
    assert key.startswith(prefix) and key.endswith(tail) and len(tail) <= 4
    assert len(shown) - 3 <= len(prefix) + 4
    assert key not in shown


def test_a_digest_tells_keys_apart_without_holding_them() -> None:
    old, new = f"sk-proj-{LONG}wxyz", f"sk-proj-{LONG[::-1]}wxyz"
    assert fingerprint(old) == fingerprint(new), "same fingerprint: the digest tells them apart"
    assert key_digest(old) != key_digest(new)
    assert key_digest(old) == hashlib.sha256(old.encode()).hexdigest()[:8]
    assert len(key_digest(old)) == 8 and key_digest(old) not in old
    assert key_digest("") == ""
