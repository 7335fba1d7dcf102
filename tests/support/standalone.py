"""A Spark standalone cluster on 127.0.0.1 (a master and one worker via pyspark's ``spark-class``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from object_store import free_port, wait_for_port


def spark_home() -> Path:
    """Pyspark's installation: its ``bin/spark-class`` and ``bin/spark-submit`` run the cluster and jobs."""
    import pyspark

    return Path(pyspark.__file__).parent


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@contextmanager
def standalone_cluster(
    log_dir: Path, *, cores: int = 2, memory: str = "2g", env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Starts a master and a worker; yields the master URL once the worker has registered."""
    home = spark_home()
    # No PYSPARK_PYTHON inherited: the executors run the Python each job names (spark.pyspark.python).
    base = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    base.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(log_dir / "work"))
    base.update(env or {})
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        with (log_dir / "master.log").open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
                    + ["--port", str(port), "--webui-port", str(ui)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=base,
                )
            )
        wait_for_port(port, procs[0], "the Spark master", timeout=120)
        with (log_dir / "worker.log").open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1"]
                    + ["--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=base,
                )
            )
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 1:
            if time.monotonic() > deadline or procs[1].poll() is not None:
                raise RuntimeError(f"the Spark worker did not register; see {log_dir}/worker.log")
            time.sleep(0.5)
        yield master
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def spark_submit(
    master: str, app: list[str], *, conf: Mapping[str, str], env: Mapping[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master MASTER [--conf k=v]... APP...`` (client mode), its output captured."""
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    full = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", **env)
    return subprocess.run(cmd + app, capture_output=True, text=True, env=full, timeout=timeout, check=False)
