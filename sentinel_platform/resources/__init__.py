"""Dagster resources: thin adapters from Dagster to the streams core and Spark."""
