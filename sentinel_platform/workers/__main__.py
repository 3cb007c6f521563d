"""``python -m sentinel_platform.workers <stream> [options]``: run one worker."""

from __future__ import annotations

import sys

from workers.cli import main

if __name__ == "__main__":
    sys.exit(main())
