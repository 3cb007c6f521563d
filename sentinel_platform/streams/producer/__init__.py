"""The producer side: publishing rows from Spark executors under backpressure, and reading
stream ranges back into Spark.
"""
