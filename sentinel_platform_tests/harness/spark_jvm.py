"""The suite's Spark JVMs: C1 only, the serial collector, and Spark's classes pre-parsed.

Every driver JVM the suite starts (a test's session, a Dagster run's, a CLI's) is launched
by Spark's launcher, which adds ``SPARK_SUBMIT_OPTS`` to the driver's ``java`` command; the
plugin sets it (and ``SPARK_CONF_DIR``) before any JVM starts, and children inherit both.
A test's JVM lives seconds on small data, so what it costs is its start: C2's compiler
threads and a parallel collector never pay back, and most of the rest is loading and
verifying some 15,000 classes of Spark, Scala and Hadoop. A class-data-sharing archive
(JDK 17's static AppCDS) holds those classes parsed and verified, and a local session
starts on about 40% less CPU with it (docs/development.md has the figures). Not the
platform's defaults: a user's long Spark jobs want C2, and the archive belongs to one Java
and one pyspark install.

The archive is built once per venv (:func:`build_archive`, about 45 s of CPU) by a
background process the plugin starts when a run collects Spark tests, and is named by a
key of the Java binary and Spark's jars, so a new pyspark or JDK builds a new one. The JVM
uses it only where the class path it was dumped with matches, and a JVM that starts
before it exists, or finds it stale, runs without it, silently (``-Xshare:auto``, the
default), so the archive can make a JVM faster but never breaks one. CDS refuses a
non-empty directory on the class path, so ``SPARK_CONF_DIR`` (the class path's first
entry) is an empty directory of ours and the options travel in ``SPARK_SUBMIT_OPTS``
instead of a ``spark-defaults.conf``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

#: What every JVM of the suite compiles and collects with.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

#: A bound on one archive build (a Spark session, then the dump), whatever the machine.
BUILD_TIMEOUT_S = 600.0

#: What the class list is taken from: the kinds of work the suite's runs do (frames from
#: Python rows, a shuffle, a join, a Python function over partitions, Parquet both ways).
_CLASS_LIST_JOB = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
rows = spark.createDataFrame([(i, str(i)) for i in range(200)], "a long, b string")
ids = spark.range(0, 2000).selectExpr("id", "id % 7 as k", "cast(id as string) as t")
ids.groupBy("k").count().collect()
rows.join(ids, rows.a == ids.id).count()
rows.rdd.mapPartitions(lambda part: [sum(1 for _ in part)]).collect()
rows.write.mode("overwrite").parquet(sys.argv[1])
spark.read.parquet(sys.argv[1]).orderBy("a").limit(3).toPandas()
spark.stop()
"""


def _cache_dir() -> Path:
    """In the venv, since the archive belongs to its pyspark (else under the temp dir)."""
    base = Path(sys.prefix) if os.access(sys.prefix, os.W_OK) else Path(tempfile.gettempdir())
    return base / "sentinel-test-jvm"


def conf_dir() -> Path:
    """The suite's ``SPARK_CONF_DIR``: empty, because CDS refuses a non-empty one."""
    return _cache_dir() / "conf"


def pyspark_home() -> Path:
    """The installed pyspark: its ``bin/`` launchers and ``jars/``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _spark_jars() -> Path | None:
    try:
        return pyspark_home() / "jars"
    except RuntimeError:
        return None


def find_java() -> str | None:
    """The ``java`` Spark's launcher runs: ``JAVA_HOME``'s, else the one on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def archive_path() -> Path | None:
    """Where this venv's archive for this Java and these jars lives (None: no Spark)."""
    found, jars = find_java(), _spark_jars()
    if found is None or jars is None or not jars.is_dir():
        return None
    java = Path(found).resolve()
    key = hashlib.sha256(str(java).encode())
    key.update(str(java.stat().st_size).encode())
    for jar in sorted(jars.iterdir()):
        key.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return _cache_dir() / f"spark-{key.hexdigest()[:16]}.jsa"


def jvm_options(archive: Path | None) -> list[str]:
    """The options of every JVM of the suite: :data:`JVM_OPTIONS` and the archive."""
    return [*JVM_OPTIONS, *([f"-XX:SharedArchiveFile={archive}"] if archive else [])]


def submit_opts(archive: Path | None) -> str:
    """``SPARK_SUBMIT_OPTS`` for a driver: the options and the archive, for the driver and,
    as a system property (``SparkConf`` reads ``spark.*`` properties as defaults), for the
    executors a standalone Worker launches on the same class path."""
    options = jvm_options(archive)
    parts = [*options, f"-Dspark.executor.extraJavaOptions={' '.join(options)}"]
    return " ".join(f'"{part}"' if " " in part else part for part in parts)


def environment() -> dict[str, str]:
    """The variables every JVM of the suite must inherit."""
    conf_dir().mkdir(parents=True, exist_ok=True)
    return {"SPARK_CONF_DIR": str(conf_dir()), "SPARK_SUBMIT_OPTS": submit_opts(archive_path())}


def needs_build() -> bool:
    archive = archive_path()
    return archive is not None and not archive.exists()


def _launch_command(class_list: Path, work: Path) -> list[str]:
    """Run the class-list job; return the ``java`` command Spark's launcher built for it."""
    env = {
        **os.environ,
        **environment(),
        "SPARK_PRINT_LAUNCH_COMMAND": "1",
        "SPARK_SUBMIT_OPTS": submit_opts(None) + f" -XX:DumpLoadedClassList={class_list}",
    }
    stderr = _run([sys.executable, "-c", _CLASS_LIST_JOB, str(work / "rows.parquet")], env)
    line = next(ln for ln in stderr.splitlines() if ln.startswith("Spark Command: "))
    return shlex.split(line.removeprefix("Spark Command: "))


def _dump(command: list[str], class_list: Path, target: Path) -> None:
    """Dump ``class_list`` into ``target`` on the class path and modules ``command`` used."""
    class_path = command[command.index("-cp") + 1]
    modules = [arg for arg in command if arg.startswith("--add-modules")]
    _run(
        [
            command[0],
            "-Xshare:dump",
            f"-XX:SharedClassListFile={class_list}",
            f"-XX:SharedArchiveFile={target}",
            "-XX:+IgnoreUnrecognizedVMOptions",
            *modules,
            "-cp",
            class_path,
        ],
        dict(os.environ),
    )


def _run(command: list[str], env: dict[str, str]) -> str:
    """Run one step of the build within its bound; its stderr, or an error that ends with it."""
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S / 2
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stderr


@contextlib.contextmanager
def _locked(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path``, waiting at most ``timeout_s`` for it."""
    deadline = time.monotonic() + timeout_s
    with open(path, "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another build held {path} for {timeout_s:.0f} s") from None
                time.sleep(0.2)
        yield


def build_archive() -> Path | None:
    """Build this venv's archive unless it exists; one builder at a time (a file lock).

    Written under a temporary name and renamed, so a JVM never maps half an archive.
    """
    archive = archive_path()
    if archive is None:
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    with _locked(archive.parent / "build.lock", BUILD_TIMEOUT_S):
        if archive.exists():
            return archive
        for stale in archive.parent.glob("tmp*"):  # a build stopped part-way
            shutil.rmtree(stale, ignore_errors=True)
        for old in archive.parent.glob("spark-*.jsa"):  # another pyspark's or Java's
            old.unlink()
        with tempfile.TemporaryDirectory(dir=archive.parent) as work:
            class_list = Path(work) / "classes.lst"
            partial = Path(work) / archive.name
            _dump(_launch_command(class_list, Path(work)), class_list, partial)
            os.replace(partial, archive)
    return archive


def start_build() -> subprocess.Popen[bytes] | None:
    """Build the archive in a process of its own (its owner stops it with :func:`stop`);
    what it prints, a failure's reason included, goes to ``build.log`` beside the archive."""
    if not needs_build():
        return None
    _cache_dir().mkdir(parents=True, exist_ok=True)
    with open(_cache_dir() / "build.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(builder: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Stop an unfinished build (its temporary directory goes with the next build's lock)."""
    if builder.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(builder.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        builder.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(builder.pid, signal.SIGKILL)
    builder.wait(5)


if __name__ == "__main__":
    build_archive()
