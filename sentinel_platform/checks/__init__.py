"""Asset checks: stream health (operations) and data quality (Spark data)."""
