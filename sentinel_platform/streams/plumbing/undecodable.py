"""Stream entries whose bytes are not UTF-8, and their exact bytes.

Any client can XADD bytes that are not UTF-8. The platform's clients decode replies with
``surrogateescape`` (``connection.py``): each byte that is not part of valid UTF-8 becomes
a lone surrogate (U+DC80..U+DCFF) instead of raising, so one foreign entry can never fail
a whole read or kill the worker that holds its batch. Such text cannot be parsed as the
producer meant it, so the worker dead-letters it as invalid; encoding it back with
``surrogateescape`` gives the exact original bytes, which the DLQ keeps as base64.
"""

from __future__ import annotations

from collections.abc import Mapping

ENCODING = "utf-8"
#: How the clients decode replies: undecodable bytes survive as lone surrogates.
ENCODING_ERRORS = "surrogateescape"


def to_bytes(text: str) -> bytes:
    """The exact bytes ``text`` was decoded from."""
    return text.encode(ENCODING, ENCODING_ERRORS)


def is_valid(text: str) -> bool:
    """True when ``text`` came from valid UTF-8 (it holds no escaped byte)."""
    try:
        text.encode(ENCODING)
    except UnicodeEncodeError:
        return False
    return True


def _first_bad_byte(text: str) -> tuple[int, int]:
    """(offset in bytes, value) of the first byte of ``text`` that is not UTF-8."""
    raw = to_bytes(text)
    try:
        raw.decode(ENCODING)
    except UnicodeDecodeError as exc:
        return exc.start, raw[exc.start]
    return 0, 0  # unreachable for text that is not valid


def undecodable_error(fields: Mapping[str, str]) -> str | None:
    """Why ``fields`` cannot be read as text, naming the first bad field; None when valid."""
    for name, value in fields.items():
        if not (name.isascii() and value.isascii()):  # a flag CPython keeps per string
            return _first_undecodable(fields)
    return None  # the common case: all ASCII, which is valid UTF-8


def _first_undecodable(fields: Mapping[str, str]) -> str | None:
    for name, value in fields.items():
        for what, text in (("name", name), ("value", value)):
            if not is_valid(text):
                offset, byte = _first_bad_byte(text)
                shown = to_bytes(name).decode(ENCODING, "backslashreplace")
                return (
                    f"field {shown!r}: its {what} is not valid UTF-8 "
                    f"(byte 0x{byte:02x} at offset {offset})"
                )
    return None


def field_bytes(fields: Mapping[str, str]) -> dict[bytes, bytes]:
    """The entry's field names and values as the exact bytes the producer wrote."""
    return {to_bytes(name): to_bytes(value) for name, value in fields.items()}


def readable(raw: bytes) -> str:
    """``raw`` as text for people: undecodable bytes shown as ``\\xNN`` escapes."""
    return raw.decode(ENCODING, "backslashreplace")
