"""``make demo-cluster``: the Spark guide's cluster recipe, step by step, against a cluster on this machine.

Runs every step docs/guides/spark-rebuild.md gives for a real cluster, with a Spark standalone
cluster (a master and a worker from pyspark's ``spark-class``) and an S3-compatible server
(moto's) on 127.0.0.1 standing in for the real ones:

1. a fresh venv with the release wheel and the pipeline's packages (not pyspark: Spark ships its own
   to the driver and the executors), packed with ``venv-pack``;
2. many-topic logs generated and uploaded to the object store;
3. ``spark-submit --archives cursorkit-env.tar.gz#env`` of ``cursorkit rebuild`` with object-store
   input and output, the executors running the packed environment's Python;
4. ``cursorkit inspect`` of the output on the object store, from the packed environment.

Exits non-zero if a step fails. ``python scripts/demo_cluster.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))

from object_store import s3_server  # noqa: E402
from standalone import spark_home, standalone_cluster  # noqa: E402

PACKAGES = ("pandas", "pyarrow", "matplotlib", "rich")
"""The pipeline's packages besides cursorkit's own (pyspark comes with Spark)."""


def step(title: str, cmd: list[str], env: dict[str, str] | None = None) -> str:
    """Prints and runs one command of the recipe; returns its output (exits on failure)."""
    print(f"\n== {title}\n$ {shlex.join(cmd)}", flush=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-5000:], done.stderr[-5000:], sep="\n")
        raise SystemExit(f"step failed ({done.returncode}): {title}")
    return done.stdout


def constraints(into: Path) -> Path:
    """requirements-dev.txt's pins without extras (pip refuses extras in a constraints file)."""
    pins = [
        line
        for line in (REPO / "requirements-dev.txt").read_text().splitlines()
        if "==" in line and "[" not in line and not line.startswith("#")
    ]
    path = into / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def main() -> int:
    """Runs the recipe; 0 when every step passed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel-dir", type=Path, default=REPO / "dist")
    ap.add_argument("--dir", type=Path, default=REPO / "cursorkit-demo-cluster")
    ap.add_argument("--topics", type=int, default=60)
    ap.add_argument("--messages", type=int, default=300_000)
    args = ap.parse_args()
    # this machine's wheel (make wheel also builds aarch64 and musllinux ones beside it)
    wheels = sorted(args.wheel_dir.glob("cursorkit-*manylinux*x86_64.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise SystemExit(f"no cursorkit wheel in {args.wheel_dir}: run make wheel")
    work: Path = args.dir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env_dir, packed = work / "env", work / "cursorkit-env.tar.gz"

    venv.create(env_dir, with_pip=True)
    py = str(env_dir / "bin" / "python")
    step(
        "1. a venv with the wheel and the pipeline's packages",
        [py, "-m", "pip", "install", "-q", "-c", str(constraints(work)), str(wheels[-1]), *PACKAGES],
    )
    step(
        "1. packed for the executors",
        [sys.executable, "-m", "venv_pack", "-p", str(env_dir), "-o", str(packed)],
    )

    logs = work / "logs"
    step(
        "2. many-topic logs",
        [sys.executable, "-m", "cursorkit.pipeline.cli", "generate", "--out", str(logs)]
        + ["--topics", str(args.topics), "--messages", str(args.messages), "--partitions", "4"],
    )
    with s3_server() as s3:
        env = dict(os.environ, **s3)
        step(
            "2. uploaded to the object store",
            [
                py,
                "-c",
                "import sys, pyarrow.fs as fs; from cursorkit.pipeline.scan import filesystem; "
                "s3, _ = filesystem('s3://demo'); s3.create_dir('demo'); "
                "fs.copy_files(sys.argv[1], 'demo/logs', source_filesystem=fs.LocalFileSystem(), "
                "destination_filesystem=s3)",
                str(logs),
            ],
            env,
        )
        cli = step(
            "3. where the CLI module is, in the packed environment",
            [py, "-c", "import cursorkit.pipeline.cli as m; print(m.__file__)"],
        ).strip()
        with standalone_cluster(work / "cluster", cores=2, memory="2g", env=s3) as master:
            out = step(
                "3. spark-submit to the cluster",
                [str(spark_home() / "bin" / "spark-submit"), "--master", master]
                + ["--archives", f"{packed}#env"]
                + ["--conf", "spark.pyspark.python=./env/bin/python"]
                + ["--conf", f"spark.pyspark.driver.python={py}"]
                + [cli, "rebuild", "--messages", "s3://demo/logs/messages", "--acks", "s3://demo/logs/acks"]
                + ["--out", "s3://demo/state"],
                env | {"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"},
            )
            print(out[-3000:])
        shown = step(
            "4. cursorkit inspect on the object store",
            [str(env_dir / "bin" / "cursorkit"), "inspect", "s3://demo/state"],
            env,
        )
        print(shown[-3000:])
        manifest = step(
            "4. the committed manifest",
            [
                py,
                "-c",
                "from cursorkit.pipeline.output import open_output; "
                "print(open_output('s3://demo/state').read('manifest.json').decode())",
            ],
            env,
        )
        doc = json.loads(manifest)
        print(f"\ncommitted run {doc['run']}: {len(doc['topics'])} topics; report {doc['report']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
