"""The read side for operators: a consumer group's state, and the dead-letter queue's
administration, export and capacity.
"""
