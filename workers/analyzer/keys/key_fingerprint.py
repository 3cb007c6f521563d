"""What may be shown of an API key: a fingerprint like the providers' own, and a digest.

Operators must tell keys apart during a rotation (which key did the provider refuse?),
yet nothing of a key may reach a log, Redis or the UI beyond what the providers
themselves print in their consoles: OpenAI shows ``sk-...abcd``, Anthropic
``sk-ant-api03-...abcd``. :func:`fingerprint` gives that: the key's *public* prefix, when
it starts with one a provider documents, and its last four characters, when the key is
long enough that four characters are a small part of it. :func:`key_digest` names a key
in Redis key names: the first hex digits of its SHA-256, which no one can turn back into
a key drawn at random. Both are pure, so their rules are one table test.
"""

from __future__ import annotations

import hashlib

#: Documented key prefixes, longest first (OpenAI project, service-account and admin
#: keys, Anthropic's, OpenRouter's, Google's, Groq's, xAI's): none is secret.
KNOWN_PREFIXES = (
    "sk-ant-admin01-",
    "sk-ant-api03-",
    "sk-svcacct-",
    "sk-or-v1-",
    "sk-admin-",
    "sk-proj-",
    "sk-ant-",
    "AIzaSy",
    "xai-",
    "gsk_",
    "sk-",
)
#: Characters of the key's end shown.
TAIL_CHARS = 4
#: The tail is shown only when the key has at least this many characters after its
#: prefix: four characters of a short key would be a large part of its secret.
MIN_SECRET_CHARS = 20
#: Hex digits of the SHA-256 that name a key in Redis (32 bits: enough to tell the few
#: keys of one rotation apart).
DIGEST_HEX = 8
#: What a worker with no key shows.
NO_KEY = "(no key)"


def fingerprint(key: str) -> str:
    """``sk-proj-...abcd``: the key's documented prefix (none when it has no known one)
    and its last :data:`TAIL_CHARS` characters, or only ``prefix...`` for a key too short
    to show any of its end; :data:`NO_KEY` for no key. Never more of the key."""
    if not key:
        return NO_KEY
    prefix = next((p for p in KNOWN_PREFIXES if key.startswith(p)), "")
    secret = key[len(prefix) :]
    tail = secret[-TAIL_CHARS:] if len(secret) >= MIN_SECRET_CHARS else ""
    return f"{prefix}...{tail}"


def key_digest(key: str) -> str:
    """The first :data:`DIGEST_HEX` hex digits of the key's SHA-256: a name for the key
    in Redis that does not reveal it ("" for no key)."""
    if not key:
        return ""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:DIGEST_HEX]
