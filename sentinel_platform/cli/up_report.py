"""What ``sentinel up`` tells its operator while it starts, runs and stops.

One logger, ``sentinel.up`` (the supervisor's too), goes to stderr and to
``sentinel-up.log`` under the logs folder, so what the terminal showed can be read again
after the terminal is gone. The lines a newcomer relies on are built here: what runs
without a click (:func:`unasked_runs`), the UI's address once it answers
(:func:`ui_url`, :func:`ui_ready`), and a crashed child's last log lines (:func:`tail`),
scrubbed because they are shown.
"""

from __future__ import annotations

import logging
import sys
import urllib.error
import urllib.request
from pathlib import Path

from sentinel_platform.cli.up_options import UpOptions
from sentinel_platform.redaction import scrub

log = logging.getLogger("sentinel.up")

TRUE_WORDS = ("1", "true", "yes", "on")


def unasked_runs(demo: bool, analyzer: bool = False) -> str:
    """The start-up line that says what runs without a click, so nothing surprises; with
    the demo on, also what it costs: its entries are marked, so the workers decide them by
    the rules alone (never a paid analyzer call) and the reports leave them out."""
    rules = "never sent to the analyzer" if analyzer else "decided by the rules"
    demo_part = (
        "the demo (demo_publish_schedule: every 5 min, synthetic rows to the streams through "
        f"its own asset demo_traffic, marked demo=1: {rules}, left out of the reports; "
        "--no-demo turns it off)"
        if demo
        else "no demo (--demo turns it on)"
    )
    return (
        f"runs by itself: the sensors, the stream-health checks every 5 min, {demo_part}; "
        "publish runs only for a new day's partition, once, when it comes due (lag gate): "
        "none for today on a fresh home"
    )


def ui_url(options: UpOptions) -> str:
    host = "127.0.0.1" if options.host in ("0.0.0.0", "::", "") else options.host
    return f"http://{host}:{options.port}"


def ui_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a child's log, scrubbed: they are shown on stderr."""
    try:
        return scrub("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    except OSError:
        return "(no log)"


def configure_logging(log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    formatter = logging.Formatter("%(asctime)s sentinel up: %(message)s", "%H:%M:%S")
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(formatter)
    file_handler = logging.FileHandler(log_dir / "sentinel-up.log")
    file_handler.setFormatter(formatter)
    log.handlers[:] = [console, file_handler]
    log.setLevel(logging.INFO)
    log.propagate = False
