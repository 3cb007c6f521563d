"""A stream declared by a module named in ``SENTINEL_STREAM_MODULES`` (test_registry.py)."""

from __future__ import annotations

import dataclasses

from sentinel_platform.registry import AXIOMS, register

EXTRA_MODULE = register(
    dataclasses.replace(
        AXIOMS,
        name="extra-module",
        stream="extra-module",
        group="extra-module-workers",
        asset="extra_module_stream",
        publish_job="publish_extra_module",
        worker_prefix="exm",
        workers_option=None,
    )
)
