"""One rebuild in a process of its own, for the many-topic benchmark: prints its figures as JSON.

``python topics_driver.py MESSAGES ACKS OUT {topics,single}`` starts a ``local[2]`` session, runs one
untimed warm-up job, then the rebuild, and prints the rebuild's wall time, its stage times and the peak
resident memory (``VmHWM``) of this driver process and of the JVM it started. A process of its own,
so the driver's peak is the rebuild's and not the benchmark's data generation.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def peak_rss(pid: int | str) -> int:
    """Peak resident set size of a process, in bytes (``VmHWM`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def main() -> None:
    messages, acks, out, mode = sys.argv[1:5]
    from cursorkit.pipeline.cluster import rebuild_topics
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
    from cursorkit.pipeline.session import spark_session

    spark = spark_session("local[2]", [("spark.sql.shuffle.partitions", "4")], app_name="cursorkit-bench")
    spark.range(1).count()
    cfg = RebuildConfig(fsync=True)
    run = rebuild_topics if mode == "topics" else rebuild
    t0 = time.perf_counter()
    summary = run(spark, messages, acks, out, cfg)
    seconds = time.perf_counter() - t0
    stages = getattr(summary, "stages", [])
    gateway: Any = spark.sparkContext._gateway
    jvm = gateway.proc.pid
    figures = {
        "seconds": seconds,
        "stages": [[s.name, s.seconds] if hasattr(s, "name") else list(s) for s in stages],
        "driver_peak_rss": peak_rss("self"),
        "jvm_peak_rss": peak_rss(jvm),
    }
    print("FIGURES " + json.dumps(figures), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
