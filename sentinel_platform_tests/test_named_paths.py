"""Every file a docstring, a comment or a doc names exists: names that stay true.

A module that moves leaves sentences behind (``see consumer.py`` after the loop became
``loop.py``); this test reads every Python file of the repository, the README and
``docs/`` for file names in backticks (``streams/consumer/calls.py``, ``calls.py``) and
fails naming each one that no longer exists. A name with a folder must exist under the
repository root, ``sentinel_platform/``, its ``streams/``, the tests or ``docs/``; a bare
file name anywhere in the repository. Files the platform writes at run time (a Dagster
home's ``dagster.yaml``) and the README's example of a new stream are not files of the
repository and are listed below.

A name that leaves the repository (an absolute path, a home directory, ``../`` climbing out
of it) is refused even when the file exists on this machine: whoever clones the repository
has only the repository, so such a sentence is broken for them (outside write-ups are cited
by title instead).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASES = (
    ROOT,
    ROOT / "sentinel_platform",
    ROOT / "sentinel_platform" / "streams",
    ROOT / "sentinel_platform_tests",
    ROOT / "docs",
)
#: Written at run time (a Dagster home, a Prometheus config), or the README's example.
NOT_IN_THE_REPOSITORY = frozenset(
    {"dagster.yaml", "prometheus.yml", "orders/assets.py", "orders/stream.py", "orders/wire.py"}
)
NAMED = re.compile(r"`{1,2}([A-Za-z0-9_./~-]*[A-Za-z0-9_-]\.(?:py|md|yml|yaml|toml))`{1,2}")
SKIPPED_PARTS = {".venv", ".git", "out", "__pycache__", "node_modules"}


def _sources() -> list[Path]:
    """Every Python file but this one (it names stale files on purpose), README, docs."""
    here = Path(__file__).resolve()
    files = [p for p in ROOT.rglob("*.py") if not SKIPPED_PARTS & set(p.parts) and p != here]
    return [*files, ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _leaves_the_repository(name: str) -> bool:
    """True when ``name`` is absolute, in a home directory or climbs out of the root.

    Read from the root, not from the other bases: from ``sentinel_platform/streams/`` a
    ``../shared/...`` would land back inside the repository and hide the escape."""
    if name.startswith(("/", "~")):
        return True
    return not (ROOT / name).resolve().is_relative_to(ROOT)


def _exists(name: str, basenames: set[str]) -> bool:
    if _leaves_the_repository(name):
        return False
    if "/" not in name:
        return name in basenames
    return any((base / name).exists() for base in BASES)


def test_every_file_named_in_a_docstring_or_doc_exists() -> None:
    basenames = {p.name for p in ROOT.rglob("*") if not SKIPPED_PARTS & set(p.parts)}
    missing = [
        f"{source.relative_to(ROOT)}: {name}"
        for source in _sources()
        for name in NAMED.findall(source.read_text(errors="replace"))
        if name not in NOT_IN_THE_REPOSITORY and not _exists(name, basenames)
    ]
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def test_the_check_finds_a_stale_name(tmp_path: Path) -> None:
    """The pattern catches both forms (a folder, a bare name) as the docstrings write them."""
    text = "see ``consumer.py`` and `streams/consumer/work_pool.py`, not ``calls.py``"
    found = NAMED.findall(text)
    assert found == ["consumer.py", "streams/consumer/work_pool.py", "calls.py"]
    basenames = {"calls.py"}
    assert [n for n in found if not _exists(n, basenames)] == found[:2]


@pytest.mark.parametrize(
    ("name", "leaves"),
    [
        ("calls.py", False),
        ("streams/consumer/calls.py", False),
        ("docs/../README.md", False),
        ("../README.md", True),
        ("../shared/seeds/README.md", True),
        ("../../shared/seeds/README.md", True),
        ("/work/shared/seeds/README.md", True),
        ("~/notes.md", True),
    ],
)
def test_a_name_outside_the_repository_is_refused(name: str, leaves: bool) -> None:
    """A path out of the repository fails even when it exists where the suite runs."""
    assert _leaves_the_repository(name) is leaves
    assert NAMED.findall(f"see `{name}`") == [name]
    if leaves:
        assert not _exists(name, {Path(name).name})
