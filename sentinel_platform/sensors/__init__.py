"""Operations sensors: lag gate (pause/resume publishing), dead letters, delivery anomalies,
publish-run failures. ``sentinel_platform.sensors.wiring`` assembles them for definitions.py."""
