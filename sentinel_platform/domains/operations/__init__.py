"""Operations: the lag gate (pause/resume publishing), stream-health checks, the dead-letter,
delivery-anomaly and run-failure sensors, and the alerts they raise."""

from sentinel_platform.domains.operations.definitions import defs
from sentinel_platform.domains.operations.targets import PublishTarget, publish_targets

__all__ = ["PublishTarget", "defs", "publish_targets"]
