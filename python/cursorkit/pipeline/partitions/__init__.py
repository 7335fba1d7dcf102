"""Per-partition functions of the rebuild job: what each Spark task runs on its Arrow batches.

Each function takes an iterator of ``pyarrow.RecordBatch`` and yields batches of a fixed schema
(``*_SCHEMA``), so Spark's ``mapInArrow`` can run it and tests can call it on plain batches. They fold
a whole partition before yielding: partial results (bitmaps, counts, maxima) whose merge on the driver
is a union, so the answer does not depend on how Spark split or ordered the rows. Problems are not
raised inside executors (a Py4J trace names no column); each partition reports counts and a first
sample row per problem in its ``stats`` row and the driver raises ``InvalidInput``.

One module per stage: ``index`` (the message index), ``acks`` (the ack fold) and ``buckets`` (the
delayed index's buckets); ``problems`` counts what is wrong, ``columns`` reads integer columns.
"""
