"""The executor side of a many-topic rebuild: each stage's function, run per partition or per topic.

Every function here runs inside a Spark task (``mapInArrow`` on partitions, ``applyInArrow`` on a
topic's group) and reuses the single-topic job's folds, so a topic's result is the one the
single-topic rebuild gives on its logs alone. Partitions hold rows of many topics: they are split
by the ``topic`` column and folded per topic; the folds are unions, merged per topic on executors.
Nothing here raises on bad input: problems travel as counts and samples in ``stats`` JSON, and
the driver raises ``InvalidInput`` naming the topic.

One module per stage: ``split`` (a partition's rows by topic), ``passes`` (the columns a pass hands
to Spark), ``index`` (the message index per topic), ``acks`` (cursors per topic), ``buckets`` (a
topic's delayed buckets) and ``write`` (a topic's stores, written by its task).
"""
