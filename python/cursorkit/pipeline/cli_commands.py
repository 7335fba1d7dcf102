"""The pipeline's command handlers: each takes the parsed arguments and a console, returns an exit status.

They import their jobs on first use, so ``cursorkit --help`` starts without PySpark.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cursorkit.errors import InvalidArgument

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["COMMANDS"]


def generate_command(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.generate import generate
    from cursorkit.pipeline.preflight.commands import check_generate

    check_generate(args.out)
    t0 = time.perf_counter()
    common = {
        "messages": args.messages,
        "keys": args.keys,
        "delayed_fraction": args.delayed_fraction,
        "subscriptions": args.subscriptions,
        "seed": args.seed,
    }
    if args.topics:
        from cursorkit.pipeline.generate_topics import generate_topics

        many = generate_topics(
            args.out,
            topics=args.topics,
            partitioned_fraction=args.partitioned_fraction,
            partitions=args.partitions,
            min_subscriptions=args.min_subscriptions,
            **common,
        )
        console.print(
            f"wrote {sum(many.topics.values()):,} messages over {len(many.topics):,} topics "
            f"(partitions counted apart) and {many.acks:,} acks to {args.out} "
            f"in {time.perf_counter() - t0:.1f} s",
            highlight=False,
        )
        return 0
    s = generate(args.out, ledgers=args.ledgers, **common)
    console.print(
        f"wrote {s.messages:,} messages ({s.delayed:,} delayed) in {s.ledgers} ledgers and "
        f"{s.acks:,} acks of {len(s.subscriptions)} subscriptions to {args.out} "
        f"in {time.perf_counter() - t0:.1f} s; "
        f"now = {s.now_ms}",
        highlight=False,
    )
    return 0


def _config(args: argparse.Namespace) -> object:
    from cursorkit.pipeline.rebuild import RebuildConfig

    return RebuildConfig(
        topic=args.topic,
        now_ms=args.now,
        min_index_count_per_bucket=args.min_index_count_per_bucket,
        max_time_step_per_segment_ms=args.max_time_step_per_segment_ms,
        max_indexes_per_segment=args.max_indexes_per_segment,
        max_delay_ms=args.max_delay_ms,
        consumers=args.consumers,
        report=not args.no_report,
        command=str(getattr(args, "command_line", "")),
    )


def rebuild_command(args: argparse.Namespace, console: Console) -> int:
    """Checks everything it can without Spark (``preflight``), then runs the one- or many-topic job."""
    from cursorkit.pipeline.display import print_summary, stage_progress
    from cursorkit.pipeline.preflight.commands import check_rebuild
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
    from cursorkit.pipeline.session import parse_conf, start_session

    cfg = _config(args)
    assert isinstance(cfg, RebuildConfig)
    conf = parse_conf(args.conf)
    plan = check_rebuild(
        args.messages,
        args.acks,
        args.out,
        master=args.master,
        cursor_store=args.cursor_store,
        cursor_objects=args.cursor_objects,
        now_ms=args.now,
        allow_empty=args.allow_empty,
    )
    spark = start_session(args.master, conf)
    if plan.many:  # a many-topic log: every topic in one job
        from cursorkit.pipeline.cluster import rebuild_topics
        from cursorkit.pipeline.output import RUNS_DIR
        from cursorkit.pipeline.topic_risk import print_topics

        with stage_progress(console) as on_stage:
            topics = rebuild_topics(spark, args.messages, args.acks, args.out, cfg, on_stage=on_stage)
        print_topics(console, topics.topics)
        where = f"output: {topics.out_dir}"
        if cfg.report:
            where += f"  report: {topics.out_dir.rstrip('/')}/{RUNS_DIR}/{topics.run}/report.html"
        console.print(where, highlight=False, soft_wrap=True)
        return _publish(args, console)
    with stage_progress(console) as on_stage:
        summary = rebuild(spark, args.messages, args.acks, args.out, cfg, on_stage=on_stage)
    print_summary(console, summary)
    return _publish(args, console)


def _publish(args: argparse.Namespace, console: Console) -> int:
    """``--cursor-store``: the rebuilt cursors written to their znodes; 1 if any could not be."""
    if args.cursor_store is None:
        return 0
    from cursorkit.pipeline.publish import publish_cursors
    from cursorkit.stores.objects import ObjectStore

    objects = ObjectStore(args.cursor_objects) if args.cursor_objects else None
    done = publish_cursors(
        args.out,
        args.cursor_store,
        one_topic=args.topic,
        objects=objects,
        overwrite=args.overwrite_cursors,
        publish_damaged=args.publish_damaged,
    )
    console.print(
        f"published {len(done.published):,} cursors to {args.cursor_store}; "
        f"{len(done.existing):,} already there (kept; --overwrite-cursors replaces them), "
        f"{len(done.truncated):,} cut at the znode's limit, {len(done.damaged):,} damaged and left out, "
        f"{len(done.failed):,} failed",
        highlight=False,
    )
    for what, items in (("left out (damaged)", done.damaged), ("published though damaged", done.forced)):
        for path, why in sorted(items.items())[:20]:
            console.print(f"  {what} {path}: {why}", highlight=False)
    if done.damaged:
        console.print("  (--publish-damaged writes damaged cursors anyway)", highlight=False)
    for path, why in sorted(done.failed.items())[:20]:
        console.print(f"  failed {path}: {why}", highlight=False)
    if done.damaged or done.failed:
        return 1
    return 0


def demo_command(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.demo import run_demo
    from cursorkit.pipeline.preflight.commands import check_demo

    check_demo(args.dir, args.master)
    ok = run_demo(
        args.dir,
        messages=args.messages,
        subscriptions=args.subscriptions,
        seed=args.seed,
        master=args.master,
        console=console,
    )
    return 0 if ok else 1


def inspect_command(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.locations import check_scheme, is_object_store
    from cursorkit.stores.location import is_zk_location

    check_scheme(args.path, "inspect", also=("zk",))  # (the inspectors are imported once it is usable)
    if args.objects is not None and not is_zk_location(args.path):
        raise InvalidArgument("--objects applies to zk:// locations only")
    if is_zk_location(args.path):  # cursor znodes, cursorkit's or Pulsar's own
        _needs("kazoo", "zookeeper", "reading zk://")
        from cursorkit.pipeline.inspector.znodes import inspect_zk, render_zk
        from cursorkit.stores.objects import ObjectStore

        if args.topic is not None:
            raise InvalidArgument("--topic applies to rebuild outputs; a zk:// path names the znodes itself")
        objects = ObjectStore(args.objects) if args.objects else None
        found = inspect_zk(args.path, objects=objects, limit=args.limit)
        if args.json:
            return _print_json(found)
        render_zk(found, console)
        return 1 if found.at_risk else 0
    if is_object_store(args.path):
        _needs("pyarrow", "objectstore", f"reading {args.path.partition('://')[0]}://")
    from cursorkit.pipeline.inspector import inspect_path, render
    from cursorkit.pipeline.inspector.topics import inspect_topic, inspect_topics
    from cursorkit.pipeline.manifest import read_topics_manifest

    summary: Any
    if is_object_store(args.path):  # a many-topic output on an object store
        summary = inspect_topics(args.path) if args.topic is None else inspect_topic(args.path, args.topic)
    else:
        path = Path(args.path)
        many = (path / "manifest.json").is_file() and read_topics_manifest(path) is not None
        if many:  # every topic is checked; --topic shows one in detail
            summary = (
                inspect_topics(str(path)) if args.topic is None else inspect_topic(str(path), args.topic)
            )
        elif args.topic is not None:
            raise InvalidArgument(f"{path} is not a many-topic rebuild output; --topic does not apply")
        else:
            summary = inspect_path(path)
    if args.json:
        return _print_json(summary)
    render(summary, console=console)
    return 1 if summary.damaged else 0


def _needs(module: str, extra: str, what: str) -> None:
    """``InvalidArgument`` naming the extra to install when ``module`` is not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:
        found = False
    if not found:
        raise InvalidArgument(
            f'{what} needs {module}, which is not installed: pip install "cursorkit[{extra}]"'
        )


def _print_json(summary: Any) -> int:
    """``--json``: the summary on stdout as one JSON document; the exit status as without it."""
    import json

    from cursorkit.pipeline.inspector.export import as_json

    print(json.dumps(as_json(summary), indent=1))
    return 1 if summary.damaged else 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "generate": generate_command,
    "rebuild": rebuild_command,
    "demo": demo_command,
    "inspect": inspect_command,
}
"""The pipeline's commands (``cursorkit.cli`` adds ``bench`` and ``completion``)."""
