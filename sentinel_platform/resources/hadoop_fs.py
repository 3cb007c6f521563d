"""Path operations on any storage URI, through Hadoop's ``FileSystem`` in Spark's own JVM.

Spark reads and writes ``hdfs://``, ``s3a://``, ``abfss://`` and ``file://`` through
Hadoop's FileSystem API; existence checks, listings and deletes go through the very same
API (and the session's Hadoop configuration: credentials, endpoints, registered
schemes), so the driver sees exactly what the executors will read. A local ``os.path``
check would look at the driver's disk, which is not where a cluster keeps its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Entry:
    """One listed child of a directory."""

    uri: str
    name: str
    is_dir: bool


class HadoopFs:
    """Existence, listing and deletion of URIs with the session's Hadoop configuration."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()

    def _resolve(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(self._conf), path

    def exists(self, uri: str) -> bool:
        fs, path = self._resolve(uri)
        return bool(fs.exists(path))

    def is_dir(self, uri: str) -> bool:
        fs, path = self._resolve(uri)
        return bool(fs.exists(path) and fs.getFileStatus(path).isDirectory())

    def list(self, uri: str) -> list[Entry]:
        """The children of directory ``uri`` sorted by name; empty if it does not exist."""
        fs, path = self._resolve(uri)
        if not fs.exists(path):
            return []
        entries = [
            Entry(str(s.getPath().toString()), str(s.getPath().getName()), bool(s.isDirectory()))
            for s in fs.listStatus(path)
        ]
        return sorted(entries, key=lambda e: e.name)

    def delete(self, uri: str) -> bool:
        """Delete ``uri`` (recursively); True if something was deleted."""
        fs, path = self._resolve(uri)
        return bool(fs.delete(path, True))
