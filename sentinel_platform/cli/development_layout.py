"""Dagster in ``sentinel up``'s development layout: one ``dg dev`` process.

One child runs Dagster's own dev server (webserver and daemon, the code location loaded
by them), which is the quickest to start and the easiest to read on one machine. It is
one process for the supervisor: if any part of it dies, the whole of it goes. The
production layout (:mod:`sentinel_platform.cli.production_layout`) runs the parts apart.
"""

from __future__ import annotations

import logging

from sentinel_platform.cli.supervisor import ChildSpec, Supervisor
from sentinel_platform.cli.up_children import repo_root, venv_script
from sentinel_platform.cli.up_options import UpOptions
from sentinel_platform.settings import Settings

log = logging.getLogger("sentinel.up")

#: The one Dagster child of this layout.
DEV_CHILD = "dagster"


def dagster_argv(options: UpOptions) -> list[str]:
    workspace = repo_root() / "workspace.yaml"
    target = (
        ["-w", str(workspace)] if workspace.exists() else ["-m", "sentinel_platform.definitions"]
    )
    # `dg dev` with an explicit target runs Dagster's own dev server (webserver + daemon);
    # `dagster dev` is the same server but warns on every start that it is superseded.
    return [venv_script("dg"), "dev", *target, "-h", options.host, "-p", str(options.port)]


def start_development(
    supervisor: Supervisor, settings: Settings, options: UpOptions, env: dict[str, str]
) -> None:
    """Add ``dg dev`` to the supervisor; its log is ``dagster.log`` in the logs folder."""
    dagster_log = settings.home_dir / "logs" / "dagster.log"
    supervisor.add(
        ChildSpec(DEV_CHILD, dagster_argv(options), env, dagster_log, repo_root(), False)
    )
    log.info("Dagster starting (DAGSTER_HOME=%s, log %s)", settings.dagster_home, dagster_log)
