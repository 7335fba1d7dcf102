"""The Spark pipeline: ``cursorkit generate | rebuild | demo | inspect``.

Rebuilds a topic's delayed index (PIP-195 bucket snapshots) and its subscriptions' cursors from
message and ack logs, on local Spark or a cluster, with a report. Importing this package does not
import PySpark; the jobs do.
"""
