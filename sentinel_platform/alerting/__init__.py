"""Alerts: one model, a cool-down kept in Redis, and a fan-out to log, Redis stream and webhook."""
