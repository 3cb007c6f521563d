"""``python -m workers.batchlane``: the lane's own process (:mod:`workers.batchlane.child`)."""

from __future__ import annotations

import sys

from workers.batchlane.child import main

if __name__ == "__main__":
    sys.exit(main())
