"""llama.cpp's server, as ``make test-llm`` builds it, runs on any x86-64 machine of the
last decade, not only on the one that built it.

pip keeps a wheel it built from source in its cache and serves it again on the next
install wherever the cache goes, whatever ``CMAKE_ARGS`` say; llama.cpp's default build
is ``-march=native``. A wheel built on a machine with AVX-512 and AMX (this project's CI
met one) then dies with SIGILL on its first computation on a machine without them, and
every test of the real model fails as a closed connection. The Makefile builds it portable
(``GGML_NATIVE=OFF``: SSE4.2, AVX, AVX2, FMA, F16C, BMI2) and outside pip's cache.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sentinel_platform_tests.harness.llama_server import LLAMA_PYTHON, missing

pytestmark = [pytest.mark.llm]

#: Registers only AVX-512 has (``zmm``, the mask registers ``k1``-``k7``) and AMX's tile
#: instructions: what a native build on a recent Intel server carries.
_BEYOND_PORTABLE = re.compile(r"%zmm\d|%k[1-7]\b|\btdpb|\btileloadd|\bldtilecfg")
_LIB_DIR = "import pathlib, llama_cpp; print(pathlib.Path(llama_cpp.__file__).parent / 'lib')"


def _cpu_library() -> Path:
    found = subprocess.run(
        [LLAMA_PYTHON, "-c", _LIB_DIR], capture_output=True, text=True, timeout=60, check=False
    )
    if found.returncode != 0:
        missing(f"{LLAMA_PYTHON} cannot import llama_cpp")
    libraries = sorted(Path(found.stdout.strip()).glob("libggml-cpu.so*"))
    assert libraries, f"no libggml-cpu.so under {found.stdout.strip()}"
    return libraries[0]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the instruction sets are x86-64's")
def test_the_cpu_library_uses_no_instruction_beyond_the_portable_set() -> None:
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils, installed with g++) is needed to read the library"
    disassembly = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(_cpu_library())],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    beyond = [line.strip() for line in disassembly.splitlines() if _BEYOND_PORTABLE.search(line)]
    assert not beyond, (
        f"{len(beyond)} instructions need AVX-512 or AMX (a -march=native build), "
        f"for example {beyond[:3]}: rebuild with make .venv/.installed-llm"
    )
