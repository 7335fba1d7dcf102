"""``cursorkit``: the command line of the pipeline (generate, rebuild, demo, inspect).

``main(argv)`` is the ``[project.scripts]`` entry point and works the same under spark-submit
(``spark-submit … -m``-style drivers call ``main`` with their arguments). Errors of the input or the
arguments print one line and exit 2; nothing else is swallowed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from cursorkit.errors import CursorkitError, InvalidArgument
from cursorkit.pipeline.display import print_summary, stage_progress

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cursorkit",
        description="Rebuild a topic's delayed index and cursors from message and ack logs on Spark.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="write synthetic message and ack logs as Parquet")
    g.add_argument("--out", required=True, type=Path)
    g.add_argument("--messages", type=int, default=1_000_000)
    g.add_argument("--ledgers", type=int, default=100)
    g.add_argument("--keys", type=int, default=10_000)
    g.add_argument("--delayed-fraction", type=float, default=0.3)
    g.add_argument("--subscriptions", type=int, default=3)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--topics", type=int, default=0, help="many topics (a topic column); 0 = one topic")
    g.add_argument(
        "--partitioned-fraction", type=float, default=0.02, help="with --topics: share partitioned"
    )
    g.add_argument(
        "--partitions", type=int, default=16, help="with --topics: partitions of a partitioned topic"
    )
    g.add_argument(
        "--min-subscriptions",
        type=int,
        default=1,
        help="with --topics: topics get min-subscriptions to --subscriptions subscriptions",
    )

    r = sub.add_parser("rebuild", help="rebuild the delayed index and cursors from logs on Spark")
    r.add_argument("--messages", required=True, help="message log (Parquet/CSV/JSON file or directory)")
    r.add_argument("--acks", help="ack log (Parquet/CSV/JSON file or directory)")
    r.add_argument("--out", required=True, help="output directory, or an object-store prefix (s3://...)")
    _rebuild_options(r)

    d = sub.add_parser("demo", help="generate a small topic, rebuild it on local Spark, verify, report")
    d.add_argument("--dir", type=Path, default=Path("cursorkit-demo"))
    d.add_argument("--messages", type=int, default=200_000)
    d.add_argument("--subscriptions", type=int, default=3)
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--master", default=None)

    i = sub.add_parser(
        "inspect", help="summarise a bucket snapshot store, a cursor store or a rebuild output"
    )
    i.add_argument(
        "path",
        help="a store, a rebuild output, an object-store output (s3://...) or cursor znodes (zk://...)",
    )
    i.add_argument("--topic", default=None, help="a topic of a many-topic rebuild output")
    i.add_argument(
        "--objects",
        default=None,
        metavar="LOCATION",
        help="with zk://: the object store of state objects, checked",
    )
    i.add_argument("--limit", type=int, default=10_000, help="with zk://: at most this many znodes visited")
    return p


def _rebuild_options(r: argparse.ArgumentParser) -> None:
    r.add_argument("--now", type=int, default=None, help="ms since the epoch (default: last publish_time)")
    r.add_argument("--topic", default="persistent://public/default/topic")
    r.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    r.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting (repeatable)"
    )
    r.add_argument("--min-index-count-per-bucket", type=int, default=50_000)
    r.add_argument("--max-time-step-per-segment-ms", type=int, default=300_000)
    r.add_argument("--max-indexes-per-segment", type=int, default=5000)
    r.add_argument("--max-delay-ms", type=int, default=365 * 24 * 3_600_000)
    r.add_argument("--consumers", type=int, default=8, help="consumers of the Key_Shared load figures")
    r.add_argument("--no-report", action="store_true", help="skip report.html")
    r.add_argument(
        "--cursor-store",
        default=None,
        metavar="zk://HOST:PORT[/CHROOT]",
        help="also publish every rebuilt cursor to its Pulsar znode in this ZooKeeper ensemble",
    )
    r.add_argument(
        "--cursor-objects",
        default=None,
        metavar="LOCATION",
        help="with --cursor-store: object store (s3://...) for cursor state beyond the znode "
        "(default: cut at Pulsar's 1,000-range metadata-store limit, and reported)",
    )
    r.add_argument(
        "--overwrite-cursors",
        action="store_true",
        help="with --cursor-store: replace cursor znodes that already exist (their owners are fenced)",
    )


def _cmd_generate(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.generate import generate

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
    )


def _cmd_rebuild(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.rebuild import RebuildConfig, rebuild
    from cursorkit.pipeline.session import parse_conf, spark_session

    cfg = _config(args)
    assert isinstance(cfg, RebuildConfig)
    conf = parse_conf(args.conf)
    spark = spark_session(args.master, conf)
    from cursorkit.pipeline.cluster import has_topic_column, print_topics, rebuild_topics
    from cursorkit.pipeline.output import is_object_store

    if args.cursor_store is not None and not args.cursor_store.startswith("zk://"):
        raise InvalidArgument(f"--cursor-store must be zk://host:port[/chroot], got {args.cursor_store!r}")
    if has_topic_column(spark, args.messages):  # a many-topic log: every topic in one job
        with stage_progress(console) as on_stage:
            topics = rebuild_topics(spark, args.messages, args.acks, args.out, cfg, on_stage=on_stage)
        print_topics(console, topics.topics)
        return _publish(args, console)
    if any(is_object_store(p) for p in (args.messages, args.acks or "", args.out)):
        raise InvalidArgument(
            "object stores are read and written by the many-topic job (logs with a topic column)"
        )
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
        args.out, args.cursor_store, one_topic=args.topic, objects=objects, overwrite=args.overwrite_cursors
    )
    console.print(
        f"published {len(done.published):,} cursors to {args.cursor_store}; "
        f"{len(done.existing):,} already there (kept; --overwrite-cursors replaces them), "
        f"{len(done.truncated):,} cut at the znode's limit, {len(done.failed):,} failed",
        highlight=False,
    )
    for path, why in sorted(done.failed.items())[:20]:
        console.print(f"  failed {path}: {why}", highlight=False)
    return 1 if done.failed else 0


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.demo import run_demo

    ok = run_demo(
        args.dir,
        messages=args.messages,
        subscriptions=args.subscriptions,
        seed=args.seed,
        master=args.master,
        console=console,
    )
    return 0 if ok else 1


def _cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    from cursorkit.pipeline.cluster import print_topics, read_topic_figures
    from cursorkit.pipeline.inspector import inspect_path, render
    from cursorkit.pipeline.load import list_topics, topic_root
    from cursorkit.pipeline.output import is_object_store

    if args.path.startswith("zk://"):  # cursor znodes, cursorkit's or Pulsar's own
        from cursorkit.pipeline.inspector.znodes import inspect_zk, render_zk
        from cursorkit.stores.objects import ObjectStore

        objects = ObjectStore(args.objects) if args.objects else None
        found = inspect_zk(args.path, objects=objects, limit=args.limit)
        render_zk(found, console)
        return 1 if found.damaged else 0
    if is_object_store(args.path):  # a many-topic output on an object store
        if args.topic is None:
            print_topics(console, read_topic_figures(args.path))
            return 0
        from cursorkit.pipeline.load import fetch_topic

        with tempfile.TemporaryDirectory(prefix="cursorkit-inspect-") as tmp:
            fetched = inspect_path(fetch_topic(args.path, args.topic, tmp))
            render(fetched, console=console)
            return 1 if fetched.damaged else 0
    path = Path(args.path)
    if (path / "manifest.json").is_file() and list_topics(path):
        if args.topic is None:  # the whole output: its topics, riskiest first
            print_topics(console, read_topic_figures(path))
            return 0
        path = topic_root(path, args.topic)
    elif args.topic is not None:
        raise InvalidArgument(f"{path} is not a many-topic rebuild output; --topic does not apply")
    summary = inspect_path(path)
    render(summary, console=console)
    return 1 if summary.damaged else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one ``cursorkit`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:  # logs and pipes: wide enough for the tables, no colour codes
        console = Console(width=120, no_color=True)
    commands = {
        "generate": _cmd_generate,
        "rebuild": _cmd_rebuild,
        "demo": _cmd_demo,
        "inspect": _cmd_inspect,
    }
    try:
        return commands[args.command](args, console)
    except (CursorkitError, OSError, RecursionError) as e:
        print(f"cursorkit {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: say so, with the traceback, under its own exit status
        traceback.print_exc()
        print(f"cursorkit {args.command}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
