"""Rebuilds for the many-topic benchmark, in a process apart from pytest: prints each one's figures as JSON.

``python topics_driver.py MESSAGES ACKS OUT {topics,single}`` starts a ``local[2]`` session, runs one
untimed warm-up job, then the rebuild, and prints the rebuild's wall time, its stage times and the peak
resident memory (``VmHWM``) of this driver process and of the JVM it started. A process of its own,
so the driver's peak is the rebuild's and not the benchmark's data generation.

``python topics_driver.py --jobs`` (the smoke run) keeps one session for many rebuilds: it reads one
job a line on stdin, a JSON list ``[MESSAGES, ACKS, OUT, MODE]``, and prints one ``FIGURES`` line per
job, or a ``FAILED`` line after the job's traceback on stderr. Before each job it resets both peaks
(``/proc/<pid>/clear_refs``), so a job's peaks are its own high-water marks over what the session
already held.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JOBS = "--jobs"
"""The argument that makes the driver read its jobs from stdin."""


def peak_rss(pid: int | str) -> int:
    """Peak resident set size of a process, in bytes (``VmHWM`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def reset_peak_rss(pid: int | str) -> None:
    """Lowers a process's ``VmHWM`` to its current resident size (writing 5 to ``clear_refs``)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def jvm_pid(spark: SparkSession) -> int:
    """The process id of the JVM the session started."""
    gateway: Any = spark.sparkContext._gateway
    return int(gateway.proc.pid)


def run_job(spark: SparkSession, messages: str, acks: str, out: str, mode: str) -> dict[str, Any]:
    """One rebuild and its figures: ``rebuild_topics`` for mode ``topics``, else ``rebuild``."""
    from cursorkit.pipeline.cluster import rebuild_topics
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild

    cfg = RebuildConfig(fsync=True)
    run = rebuild_topics if mode == "topics" else rebuild
    t0 = time.perf_counter()
    summary = run(spark, messages, acks, out, cfg)
    seconds = time.perf_counter() - t0
    stages = getattr(summary, "stages", [])
    return {
        "seconds": seconds,
        "stages": [[s.name, s.seconds] if hasattr(s, "name") else list(s) for s in stages],
        "driver_peak_rss": peak_rss("self"),
        "jvm_peak_rss": peak_rss(jvm_pid(spark)),
    }


def run_jobs(spark: SparkSession) -> None:
    """Runs the jobs of stdin's lines in turn, printing one ``FIGURES`` or ``FAILED`` line for each."""
    for line in sys.stdin:
        if not line.strip():
            continue
        messages, acks, out, mode = json.loads(line)
        reset_peak_rss("self")
        reset_peak_rss(jvm_pid(spark))
        try:
            figures = run_job(spark, messages, acks, out, mode)
        except Exception:
            traceback.print_exc()
            sys.stderr.flush()
            print("FAILED", flush=True)
            continue
        print("FIGURES " + json.dumps(figures), flush=True)


def main() -> None:
    from cursorkit.pipeline.session import spark_session

    spark = spark_session("local[2]", [("spark.sql.shuffle.partitions", "4")], app_name="cursorkit-bench")
    spark.range(1).count()
    if sys.argv[1:] == [JOBS]:
        run_jobs(spark)
    else:
        messages, acks, out, mode = sys.argv[1:5]
        print("FIGURES " + json.dumps(run_job(spark, messages, acks, out, mode)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
