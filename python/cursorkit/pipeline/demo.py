"""``cursorkit demo``: generate a small topic, rebuild it on local Spark, verify it, point at the report.

The rebuild uses smaller buckets and segments than Pulsar's defaults so that a topic of a few
hundred thousand messages still shows several buckets of many segments each.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rich.console import Console

from cursorkit.pipeline.display import print_summary, stage_progress
from cursorkit.pipeline.generate import generate
from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
from cursorkit.pipeline.reference import rebuild_reference
from cursorkit.pipeline.session import start_session
from cursorkit.pipeline.verify import verify_rebuild

__all__ = ["DEMO_CONFIG", "run_demo"]

DEMO_CONFIG = RebuildConfig(min_index_count_per_bucket=5000, max_indexes_per_segment=500, consumers=8)
"""Small buckets (5,000 indexes) and segments (500) so the demo topic has visible structure."""


def run_demo(
    directory: str | Path,
    *,
    messages: int = 200_000,
    subscriptions: int = 3,
    seed: int = 7,
    master: str | None = None,
    console: Console | None = None,
) -> bool:
    """Runs generate → rebuild → verify in ``directory`` (replaced if it holds an earlier demo).

    Returns whether the rebuilt outputs equal the single-process reference.
    """
    con = console if console is not None else Console()
    root = Path(directory)
    logs = root / "logs"
    out = root / "rebuild"
    if logs.exists():
        shutil.rmtree(logs)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    gen = generate(
        logs,
        messages=messages,
        ledgers=max(1, messages // 5000),
        keys=max(1, messages // 40),
        delayed_fraction=0.3,
        subscriptions=subscriptions,
        seed=seed,
    )
    con.print(
        f"generated {gen.messages:,} messages ({gen.delayed:,} delayed) in {gen.ledgers} ledgers and "
        f"{gen.acks:,} acks of {len(gen.subscriptions)} subscriptions in {time.perf_counter() - t0:.1f} s",
        highlight=False,
    )
    t1 = time.perf_counter()
    spark = start_session(master)
    con.print(
        f"Spark {spark.version} on {spark.sparkContext.master} started in {time.perf_counter() - t1:.1f} s"
    )
    with stage_progress(con) as on_stage:
        summary = rebuild(spark, gen.messages_path, gen.acks_path, out, DEMO_CONFIG, on_stage=on_stage)
    print_summary(con, summary)
    t2 = time.perf_counter()
    ref = rebuild_reference(
        gen.messages_path,
        gen.acks_path,
        min_index_count_per_bucket=DEMO_CONFIG.min_index_count_per_bucket,
        max_delay_ms=DEMO_CONFIG.max_delay_ms,
    )
    check = verify_rebuild(out, ref)
    con.print(
        f"verified against a single-process rebuild in {time.perf_counter() - t2:.1f} s: "
        f"{check.cursors} cursors, {check.buckets} buckets, {check.delayed_messages:,} delayed "
        f"messages recovered, {check.emitted:,} emitted in deliver-at order",
        highlight=False,
    )
    if check.ok:
        con.print("[bold green]outputs equal the reference[/]")
    else:
        for p in check.problems:
            con.print(f"[bold red]mismatch:[/] {p}")
    con.print(f"report: {(out / 'report.html').resolve()}", highlight=False)
    con.print(f"total {time.perf_counter() - t0:.1f} s", highlight=False)
    return check.ok
