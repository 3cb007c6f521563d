"""Storage locations as URIs: what Spark and Hadoop understand, on any filesystem.

The data and landing roots may live on the local disk, HDFS or an object store, so they
are kept as URI strings (``file:///srv/data``, ``hdfs://nn:8020/sentinel``,
``s3a://bucket/sentinel``) and never pass through :class:`pathlib.Path`, which would
fold ``s3a://b/data`` into ``s3a:/b/data``. A plain local path is accepted for
convenience and becomes a ``file://`` URI. Everything here is pure string handling; the
filesystem itself is reached through Hadoop (:mod:`sentinel_platform.resources.hadoop_fs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

#: Schemes of the filesystems Spark's Hadoop client serves out of the box or with the
#: usual connector jar on the classpath.
KNOWN_SCHEMES: tuple[str, ...] = (
    "file",
    "hdfs",
    "viewfs",
    "s3a",
    "abfs",
    "abfss",
    "wasb",
    "wasbs",
    "gs",
)
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
_REGISTERED = re.compile(r"^spark\.hadoop\.fs\.(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)\.impl$")


def scheme_of(value: str) -> str | None:
    """The URI scheme of ``value`` (lower case), or None for a plain local path."""
    match = _SCHEME.match(value)
    return match["scheme"].lower() if match else None


def registered_schemes(spark_conf: Mapping[str, str]) -> set[str]:
    """Schemes given a FileSystem class in the Spark configuration (``spark.hadoop.fs.X.impl``)."""
    return {m["scheme"].lower() for key in spark_conf if (m := _REGISTERED.match(key))}


def storage_problem(value: str, extra_schemes: Iterable[str] = ()) -> str | None:
    """Why ``value`` cannot be a storage root, or None if it can."""
    if not value.strip():
        return "must not be empty"
    scheme = scheme_of(value)
    if scheme is None:
        if ":" in value.split("/", 1)[0]:
            return "is neither a URI (scheme://...) nor a local path"
        return None
    allowed = sorted({*KNOWN_SCHEMES, *extra_schemes})
    if scheme not in allowed:
        return (
            f"scheme {scheme!r} is not one of {', '.join(s + '://' for s in allowed)} "
            f"(register another with spark.hadoop.fs.{scheme}.impl in SENTINEL_SPARK_CONF)"
        )
    if not urlsplit(value).path.strip("/") and not urlsplit(value).netloc:
        return "names no location"
    return None


def as_uri(value: str | Path) -> str:
    """``value`` as a URI without a trailing slash; local paths become absolute ``file://``."""
    text = str(value)
    if scheme_of(text) is None:
        return Path(text).expanduser().resolve().as_uri()
    return text.rstrip("/") if urlsplit(text).path.strip("/") else text


def join(base: str, *parts: str) -> str:
    """``base`` with ``parts`` appended as path segments."""
    segments = [p.strip("/") for p in parts if p.strip("/")]
    return "/".join([base.rstrip("/"), *segments]) if segments else base


def name_of(uri: str) -> str:
    """The last path segment of ``uri`` (a file or directory name)."""
    return PurePosixPath(urlsplit(uri).path).name


def suffix_of(uri: str) -> str:
    """The lower-case extension of ``uri``'s last segment (``.csv``), or ``""``."""
    return PurePosixPath(urlsplit(uri).path).suffix.lower()
