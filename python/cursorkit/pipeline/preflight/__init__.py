"""Checks of a command's inputs made before Spark or any session starts, each failing in one line.

A mistake found after Spark has started costs its start-up (20 s to a minute) and can arrive wrapped
in a Java trace; found here it costs milliseconds. Only what is cheap is read:

- paths: the logs exist and hold files; the output is a place a run may write (local for a one-topic
  log, local or ``s3://`` for a many-topic log) (``outputs``);
- Parquet footers (never the rows): column names and types, row counts, and each column's statistics:
  nulls in a column that may not hold them, negative ids or times, times that are µs or ns rather
  than ms (a log whose writer kept no statistics is checked by the job itself, as before) (``logs``);
- the first row group of the ack log's ``ack_type`` (or the first lines of a CSV/JSON log,
  ``text_sample``): values other than ``individual``/``cumulative`` in any case;
- a TCP connect to a ``spark://`` master and to the ``--cursor-store`` ZooKeeper ensemble, and the
  Java that Spark's launcher would run (``services``).

The one-topic and the many-topic jobs share these checks (``commands``): :func:`check_rebuild` also
says which job the logs are for (a ``topic`` column or not). Everything only the data shows (duplicate
positions, gaps in a ledger, acks of unknown positions) is still found by the job, with a sample row.
"""
