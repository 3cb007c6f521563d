"""The README is a page a newcomer can finish: short, with no way out of the repository
but the local UI, and every link it gives leads to a file that exists. The same holds for
the links of the documents under ``docs/``."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_LINES = 200
#: Inline markdown links and images: ``[text](target)`` / ``![alt](target)``.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
URL = re.compile(r"\bhttps?://[^\s)>`'\"]+")
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def _relative_targets(text: str) -> list[str]:
    targets = []
    for target in LINK.findall(_prose(text)):
        if urlsplit(target).scheme or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_readme_is_at_most_200_lines() -> None:
    count = len(README.read_text().splitlines())
    assert count <= MAX_LINES, (
        f"README.md has {count} lines, more than {MAX_LINES}: move detail into docs/ and link it"
    )


def test_readme_links_nowhere_outside_the_repository_but_the_local_ui() -> None:
    text = README.read_text()
    outside = sorted({u for u in URL.findall(text) if urlsplit(u).hostname not in LOCAL_HOSTS})
    assert not outside, f"README.md points outside the repository: {outside}"
    linked = [t for t in LINK.findall(_prose(text)) if urlsplit(t).scheme]
    assert not linked, f"README.md has links that are not files of the repository: {linked}"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(page: Path) -> None:
    targets = _relative_targets(page.read_text())
    missing = sorted({t for t in targets if not (page.parent / t).exists()})
    assert not missing, f"{page.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_readme_links_reach_the_moved_documentation() -> None:
    targets = set(_relative_targets(README.read_text()))
    moved = {
        "docs/settings.md",
        "docs/configuration.md",
        "docs/scaling.md",
        "docs/design-notes.md",
        "docs/cli.md",
        "docs/troubleshooting.md",
        "docs/workers.md",
        "docs/ui-tour.md",
        "docs/development.md",
    }
    assert moved <= targets, f"README.md does not link {sorted(moved - targets)}"
