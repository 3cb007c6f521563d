"""The README and its docs are the user's reference: the settings table (docs/settings.md)
must list every setting with the default the code really uses, and the README's
prerequisites must be exactly what CI installs on a clean machine (CI is the newcomer)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

from sentinel_platform.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETTINGS_DOC = ROOT / "docs" / "settings.md"
CI_RUN = ROOT / ".ci" / "run"
ROW = re.compile(r"^\| `(?P<env>[A-Z_]+)` \| (?P<default>[^|]+) \|", re.MULTILINE)


def _env_name(field: str) -> str:
    return "REDIS_URL" if field == "redis_url" else f"{ENV_PREFIX}{field.upper()}"


def _documented(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):  # a comma-separated variable
        value = ",".join(value)
    if value == "":
        return '`""`'
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _settings_section() -> str:
    """The settings reference (moved out of the README into docs/settings.md)."""
    return SETTINGS_DOC.read_text()


def test_readme_lists_every_setting_with_the_default_of_the_code() -> None:
    rows = {m["env"]: m["default"].strip() for m in ROW.finditer(_settings_section())}
    expected = {
        _env_name(name): _documented(field.get_default(call_default_factory=True))
        for name, field in Settings.model_fields.items()
    }
    missing = sorted(set(expected) - set(rows))
    assert not missing, f"settings missing from docs/settings.md: {missing}"
    unknown = sorted(set(rows) - set(expected))
    assert not unknown, f"docs/settings.md documents settings the code does not have: {unknown}"
    wrong = {env: (rows[env], want) for env, want in expected.items() if rows[env] != want}
    assert not wrong, f"docs/settings.md default differs from the code (doc, code): {wrong}"


def _readme_prerequisites() -> set[str]:
    """Packages of the apt-get line that follows the README's prerequisites marker."""
    text = README.read_text()
    marker = text.index("<!-- prerequisites:")
    match = re.search(r"apt-get install -y ([^\n`]+)", text[marker:])
    assert match, "no apt-get install line after the prerequisites marker in README.md"
    return set(match[1].split())


def _ci_prerequisites() -> set[str]:
    match = re.search(r"^PREREQUISITES=\(([^)]*)\)", CI_RUN.read_text(), re.MULTILINE)
    assert match, "no PREREQUISITES=(...) in .ci/run"
    return set(match[1].split())


def _ci_parts() -> tuple[str, str]:
    """.ci/run before and from its second-server pass."""
    text = CI_RUN.read_text()
    start = text.index('part "second server')
    return text[:start], text[start:]


def test_ci_installs_exactly_the_readme_prerequisites() -> None:
    readme, ci = _readme_prerequisites(), _ci_prerequisites()
    assert readme == ci, f"README lists {sorted(readme)}, .ci/run installs {sorted(ci)}"
    assert {"openjdk-17-jre-headless", "chromium"} <= ci


def test_ci_main_run_uses_the_embedded_server_and_no_apt_redis() -> None:
    main, _second = _ci_parts()
    commands = "\n".join(line for line in main.splitlines() if not line.lstrip().startswith("#"))
    assert not any("redis" in package for package in _ci_prerequisites())
    assert "redis-server" not in commands and "redis-tools" not in commands
    assert "wheel_binary()" in main and "export SENTINEL_REDIS_SERVER" in main
    assert re.search(r"^make test$", main, re.MULTILINE), "CI must run the README's make test"
    assert re.search(r"^make lint$", main, re.MULTILINE)
    assert "REQUIRE_CLUSTER_TESTS=1" in main
    assert "set -euo pipefail" in main


def test_ci_second_pass_runs_existing_redis_facing_tests_on_debian_redis() -> None:
    _main, second = _ci_parts()
    assert "apt_install redis-server" in second
    assert "SENTINEL_REDIS_SERVER=/usr/bin/redis-server" in second
    # streams/plumbing/test_tls.py runs here on Debian's TLS-capable server, and may not skip.
    assert "REQUIRE_TLS_TESTS=1" in second
    # By marker, not folder (markers say how a test runs): the Redis-facing tests, the
    # cluster ones among them, whatever folder mirrors the code they test.
    selected = re.findall(r'-m "([^"]+)"', second)
    assert selected == ["(redis and not dagster or cluster) and not llm"], selected
    assert not re.findall(r"(sentinel_platform_tests/\S+)", second.split("-m ", 1)[1])


def _project_table() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_constraints_pin_every_declared_dependency_and_make_installs_with_them() -> None:
    pins = {
        Requirement(line.split(";")[0]).name.lower().replace("_", "-"): line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    project = _project_table()
    declared = [*project["dependencies"]]
    for extra in ("test", "bench", "llm"):
        declared += project["optional-dependencies"][extra]
    for spec in declared:
        requirement = Requirement(spec)
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is declared in pyproject.toml but not in constraints.txt"
        pinned = pins[name].split(";")[0].split("==")[1].strip()
        assert requirement.specifier.contains(pinned), f"{pins[name]!r} violates {spec!r}"
    assert "sentinel-platform" not in pins
    makefile = (ROOT / "Makefile").read_text()
    assert "install -c constraints.txt" in makefile
