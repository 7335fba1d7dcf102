"""A many-topic rebuild that kills itself (SIGKILL, no cleanup) at a named point of its commit.

``python topics_crash_child.py MESSAGES ACKS OUT POINT`` with POINT one of:

- ``staged``: every topic is staged under ``runs/<run>/``, before the run's summary is written;
- ``summary``: the run's ``summary.json`` is written, the root manifest not yet;
- ``manifest``: the root manifest is written (the commit), the staging of other runs not yet removed;
- ``none``: no kill (prints ``DONE``).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from cursorkit.pipeline import cluster, output
from cursorkit.pipeline.rebuild import RebuildConfig
from cursorkit.pipeline.session import spark_session


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    messages, acks, out, point = sys.argv[1:5]
    real_commit = cluster.commit_run
    real_write = output.LocalOutput.write
    real_remove = cluster.remove_unreferenced

    def commit(*args: Any, **kwargs: Any) -> None:
        if point == "staged":
            die()
        real_commit(*args, **kwargs)

    def write(self: output.LocalOutput, rel: str, data: bytes, *, sync: bool) -> None:
        real_write(self, rel, data, sync=sync)
        if point == "summary" and rel.endswith("summary.json"):
            die()

    def remove(out_: Any, keep: Any) -> None:
        if point == "manifest" and keep is not None:
            die()
        real_remove(out_, keep)

    cluster.commit_run = commit  # type: ignore[assignment]
    output.LocalOutput.write = write  # type: ignore[method-assign]
    cluster.remove_unreferenced = remove  # type: ignore[assignment]
    spark = spark_session("local[1]", [("spark.sql.shuffle.partitions", "2")], app_name="crash-child")
    cfg = RebuildConfig(min_index_count_per_bucket=150, max_indexes_per_segment=60)
    cluster.rebuild_topics(spark, messages, acks, out, cfg)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
