"""The test suite's own layout: shared fixtures come from the harness plugin, never a conftest.

Fixtures shared between folders are registered once by ``sentinel_platform_tests.harness.plugin``
(its :mod:`~sentinel_platform_tests.harness.fixtures`), and helpers are imported from harness
modules. A test module importing from a conftest.py couples the test to another folder's
private set-up and hides where a fixture comes from; one conftest importing another makes
the same fixture appear under two owners. Both are read off the source with :mod:`ast`
(imports at any depth), so a new one fails here, not in review.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

SUITE = Path(__file__).resolve().parent
ROOT = SUITE.parent
FIXTURES = SUITE / "harness" / "fixtures"


def imported_modules(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in ``tree``; relative imports resolved in ``package``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield node.lineno, base
            for alias in node.names:  # ``from pkg import conftest``
                yield node.lineno, f"{base}.{alias.name}"


def suite_modules() -> Iterator[tuple[Path, ast.AST, str]]:
    for path in sorted(SUITE.rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).parent.parts)
        yield path, ast.parse(path.read_text(), str(path)), package


def test_no_module_of_the_suite_imports_a_conftest() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path, tree, package in suite_modules()
        for line, module in imported_modules(tree, package)
        if module.split(".")[-1] == "conftest"
    ]
    assert not found, "import the helper from a harness module instead:\n" + "\n".join(found)


def test_the_module_imports_are_read_at_any_depth_and_relative_ones_resolved() -> None:
    source = "def f():\n    from .conftest import x\n    import a.conftest\n"
    modules = [m for _, m in imported_modules(ast.parse(source), "pkg.tests")]
    assert "pkg.tests.conftest" in modules
    assert "a.conftest" in modules


def test_each_shared_fixture_is_defined_once() -> None:
    names: Counter[str] = Counter()
    for path in sorted(FIXTURES.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            decorated = isinstance(node, ast.FunctionDef) and any(
                "fixture" in ast.unparse(d) for d in node.decorator_list
            )
            if decorated:
                assert isinstance(node, ast.FunctionDef)
                names[node.name] += 1
    assert "tx_keys" in names and "start_worker" in names
    assert not [n for n, count in names.items() if count > 1]


def test_the_plugin_is_loaded_by_the_suite_configuration() -> None:
    addopts = (ROOT / "pyproject.toml").read_text()
    assert "-p sentinel_platform_tests.harness.plugin" in addopts


#: Folders of the suite that mirror no package of the code, and why.
NOT_A_PACKAGE = {
    "harness": "the suite's own harness",
    "bench": "the bench/ scripts",
    "deploy": "the shipped deploy/ files",
}


def test_every_test_folder_mirrors_a_package_of_the_code() -> None:
    """A folder of tests is named after the package its tests are about, not how they run."""
    stray = []
    for init in sorted(SUITE.rglob("__init__.py")):
        folder = init.parent.relative_to(SUITE)
        if folder == Path(".") or folder.parts[0] in NOT_A_PACKAGE:
            continue
        mirrors = (ROOT / "sentinel_platform" / folder, ROOT / folder)
        if not any((package / "__init__.py").is_file() for package in mirrors):
            stray.append(str(folder))
    assert not stray, f"test folders mirroring no package: {stray}"
