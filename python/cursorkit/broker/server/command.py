"""``cursorkit broker``: runs a broker until SIGINT or SIGTERM (both stop it cleanly, exit status 0).

Alone it is a single node; brokers given the same ``--data`` and ``--metadata`` share the topics.
What keeps it from starting is one line on stderr and exit status 2: a data directory another
broker holds, or a module of an extra that is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cursorkit.errors import InvalidArgument

if TYPE_CHECKING:
    from cursorkit.broker.server.config import BrokerConfig

__all__ = ["add_parser", "run_broker"]

_BROKER_MODULES = (("re2", "google-re2", "broker"),)
"""What the broker imports from its extra: (module, package, extra)."""
_METADATA_MODULES = (("kazoo", "kazoo", "zookeeper"),)
"""What ``--metadata`` needs besides."""
_HTTP_MODULES = (("aiohttp", "aiohttp", "broker"),)
"""What ``--http-port`` needs besides (imported only then: the broker starts without it otherwise)."""


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """The ``broker`` command's arguments."""
    b = sub.add_parser(
        "broker",
        help="run a broker on Pulsar's binary protocol (no authentication)",
        description=(
            "Serve Pulsar's binary protocol on cursorkit: topics in DIR (message logs, cursor stores),\n"
            "created on first use. The official Pulsar clients connect to pulsar://HOST:PORT.\n"
            "With --metadata, brokers sharing DIR and a ZooKeeper root split the topics between them.\n"
            "Nothing is authenticated: keep the default 127.0.0.1 unless the network is trusted."
        ),
        epilog=(
            "examples:\n  cursorkit broker --data ./broker-data --port 6650\n"
            "  cursorkit broker --data ./shared --port 6650 --metadata zk://127.0.0.1:2181/brokers\n"
            "  cursorkit broker --data ./shared --port 6651 --metadata zk://127.0.0.1:2181/brokers\n"
        ),
        formatter_class=formatter,
    )
    b.add_argument(
        "--data", required=True, type=Path, metavar="DIR", help="where topics and cursors are kept"
    )
    b.add_argument("--port", type=int, default=6650, help="port to listen on (0: any free port)")
    b.add_argument("--host", default="127.0.0.1", help="address to listen on")
    b.add_argument(
        "--http-port",
        type=int,
        default=-1,
        help="serve Pulsar's admin REST paths and Prometheus /metrics on this port (0: any free port; "
        "default: no HTTP server)",
    )
    b.add_argument(
        "--partitioned-topic",
        action="append",
        default=[],
        metavar="TOPIC=N",
        help="declare a partitioned topic with N partitions (repeatable; kept in DIR)",
    )
    b.add_argument(
        "--metadata",
        default="",
        metavar="zk://HOST:PORT/ROOT",
        help="share topics with the brokers of this ZooKeeper root and the same --data: each topic is "
        "owned by one broker (lookups redirect to it) and moves when it stops or dies; cursors "
        "are kept in ZooKeeper (default: one node, cursors in DIR)",
    )
    b.add_argument(
        "--advertised",
        default="",
        metavar="pulsar://HOST:PORT",
        help="the URL other brokers and lookups give clients for this one (default: its --host and port)",
    )
    b.add_argument(
        "--segment-bytes",
        type=int,
        default=64 * 1024 * 1024,
        metavar="N",
        help="a ledger (one segment file) rolls over past this many bytes",
    )
    b.add_argument(
        "--delayed-tracker",
        choices=["bucket", "memory"],
        default="bucket",
        help="where delayed messages wait: PIP-195's bucket tracker, its sealed buckets snapshotted in "
        "DIR (default), or Pulsar's in-memory tracker",
    )
    b.add_argument(
        "--bucket-min-index-count",
        type=int,
        default=50_000,
        metavar="N",
        help="delayed messages per sealed bucket (Pulsar's delayedDeliveryMinIndexCountPerBucket)",
    )
    b.add_argument(
        "--max-unacked-per-key",
        type=int,
        default=0,
        metavar="N",
        help="beyond Pulsar: a Key_Shared key with N messages unacknowledged gets no more until some are "
        "acked or nacked (default 0: no cap, as Pulsar)",
    )
    b.add_argument(
        "--stuck-consumer-timeout-ms",
        type=int,
        default=0,
        metavar="MS",
        help="beyond Pulsar: a Key_Shared consumer with no ack, nack or flow for MS while holding messages "
        "(or out of permits) is isolated: its keys' entries are dropped from memory and read again when it "
        "recovers or leaves, so it cannot stall the others (default 0: off, as Pulsar)",
    )
    b.add_argument(
        "--key-ordered-nacks",
        action="store_true",
        help="beyond Pulsar: on Key_Shared, a nack keeps its key's order (the key's later messages are "
        "sent again after the nacked one; acks overtaking it wait) (default: off, as Pulsar)",
    )
    b.add_argument(
        "--durable-redelivery-counts",
        action="store_true",
        help="beyond Pulsar: redelivery counts survive restarts, hand-overs and reconnects, so dead-letter "
        "policies fire (default: in memory, as Pulsar)",
    )
    b.add_argument(
        "--sync",
        choices=("always", "never"),
        default="always",
        help="always (default): every receipt and cursor flush waits for its fsync, made off the event "
        "loop with group commit; never: no fsync at all (tests only: a machine crash loses receipted "
        "messages and acks)",
    )
    b.add_argument("--no-sync", action="store_true", help="the same as --sync never")
    _add_limits(b)


def _add_limits(b: argparse.ArgumentParser) -> None:
    """What one client may cost (the reference guide's "Limits" table; defaults from ``BrokerConfig``)."""
    from cursorkit.broker.server.config import BrokerConfig

    d = BrokerConfig(data=Path("."))
    limits = b.add_argument_group("limits (what one client may cost; 0 turns a connection count off)")
    limits.add_argument(
        "--max-connections",
        type=int,
        default=d.max_connections,
        metavar="N",
        help="connections at once; one more gets NotAllowedError and is closed",
    )
    limits.add_argument(
        "--max-connections-per-address",
        type=int,
        default=d.max_connections_per_address,
        metavar="N",
        help="connections from one peer address at once",
    )
    limits.add_argument(
        "--max-buffered-bytes",
        type=int,
        default=d.max_buffered_bytes,
        metavar="BYTES",
        help="bytes of unfinished frames over all connections; past it, connections holding a large "
        "unfinished frame wait to read",
    )
    limits.add_argument(
        "--frame-timeout-s",
        type=float,
        default=d.frame_timeout_s,
        metavar="S",
        help="close a connection without CONNECT, or holding an unfinished frame, after S seconds",
    )
    limits.add_argument(
        "--max-open-topics",
        type=int,
        default=d.max_open_topics,
        metavar="N",
        help="topics open at once: idle ones are closed to make room; when none is idle a new topic "
        "gets ServiceNotReady",
    )
    limits.add_argument(
        "--topic-idle-s",
        type=float,
        default=d.topic_idle_s,
        metavar="S",
        help="close a topic without producers and consumers after S seconds",
    )
    limits.add_argument(
        "--topic-loads-per-s",
        type=float,
        default=d.topic_loads_per_s,
        metavar="N",
        help="new topics one connection may open per second (as many at once); past it ServiceNotReady",
    )
    limits.add_argument(
        "--max-topic-loads-per-s",
        type=float,
        default=d.max_topic_loads_per_s,
        metavar="N",
        help="new topics opened per second over all connections (twice as many at once); past it "
        "ServiceNotReady",
    )
    limits.add_argument(
        "--max-subscriptions-per-topic",
        type=int,
        default=d.max_subscriptions_per_topic,
        metavar="N",
        help="subscriptions one topic may have; a new one past it gets NotAllowedError (0: no limit)",
    )
    limits.add_argument(
        "--max-consumers-per-subscription",
        type=int,
        default=d.max_consumers_per_subscription,
        metavar="N",
        help="consumers one subscription may have; one more gets ConsumerBusy (0: no limit)",
    )
    limits.add_argument(
        "--max-producers-per-topic",
        type=int,
        default=d.max_producers_per_topic,
        metavar="N",
        help="producers one topic may have; one more gets ProducerBusy (0: no limit)",
    )
    limits.add_argument(
        "--max-command-bytes",
        type=int,
        default=d.max_command_bytes,
        metavar="BYTES",
        help="the largest command (besides its message) decoded in Python; a larger one is refused",
    )
    limits.add_argument(
        "--max-concurrent-topic-loads",
        type=int,
        default=d.max_concurrent_topic_loads,
        metavar="N",
        help="topics opened at once, off the event loop",
    )


def _partitioned(specs: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in specs:
        name, sep, n = spec.rpartition("=")
        if not sep or not name or not n.isdigit():
            raise InvalidArgument(f"--partitioned-topic takes TOPIC=N, got {spec!r}")
        out[name] = int(n)
    return out


def _missing_extra(metadata: bool, http: bool = False) -> str | None:
    """What to install when a module the broker needs does not import (None: all of them do)."""
    needed = _BROKER_MODULES + (_METADATA_MODULES if metadata else ()) + (_HTTP_MODULES if http else ())
    for module, package, extra in needed:
        try:
            importlib.import_module(module)
        except ImportError as e:
            absent = isinstance(e, ModuleNotFoundError) and e.name == module
            why = "is not installed" if absent else f"does not import ({e})"
            need = "--metadata needs" if extra == "zookeeper" else "the broker needs"
            return f'{need} {package}, which {why}: pip install "cursorkit[{extra}]"'.replace("\n", " ")
    return None


async def _serve(config: BrokerConfig, partitioned: dict[str, int]) -> None:
    from cursorkit.broker.server.broker import Broker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before the start: a signal meanwhile stops it after
        loop.add_signal_handler(sig, stop.set)
    broker = Broker(config, partitioned)
    await broker.start()
    admin = None
    try:
        if config.http_port >= 0:  # beside the binary port, on the same loop
            from cursorkit.broker.server.admin.http_server import AdminServer

            admin = AdminServer(broker)
            await admin.start(config.host, config.http_port)
        named = f"admin {admin.url}, " if admin is not None else ""
        print(f"cursorkit broker ready on {broker.service_url} ({named}data in {config.data})", flush=True)
        await stop.wait()
    finally:
        if admin is not None:
            await admin.stop()
        await broker.stop()


def run_broker(args: argparse.Namespace) -> int:
    """Runs the broker the arguments describe; returns the exit status."""
    missing = _missing_extra(bool(args.metadata), args.http_port >= 0)
    if missing is not None:
        print(f"cursorkit broker: {missing}", file=sys.stderr)
        return 2
    from cursorkit.broker.server.config import BrokerConfig
    from cursorkit.broker.server.data_lock import DataInUse

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    config = BrokerConfig(
        data=args.data,
        host=args.host,
        port=args.port,
        http_port=args.http_port,
        sync=args.sync == "always" and not args.no_sync,
        metadata=args.metadata,
        advertised=args.advertised,
        segment_bytes=args.segment_bytes,
        delayed_tracker=args.delayed_tracker,
        bucket_min_index_count=args.bucket_min_index_count,
        max_unacked_per_key=args.max_unacked_per_key,
        durable_redelivery_counts=args.durable_redelivery_counts,
        key_ordered_nacks=args.key_ordered_nacks,
        stuck_consumer_timeout_ms=args.stuck_consumer_timeout_ms,
        max_connections=args.max_connections,
        max_connections_per_address=args.max_connections_per_address,
        max_buffered_bytes=args.max_buffered_bytes,
        frame_timeout_s=args.frame_timeout_s,
        max_open_topics=args.max_open_topics,
        topic_idle_s=args.topic_idle_s,
        topic_loads_per_s=args.topic_loads_per_s,
        max_topic_loads_per_s=args.max_topic_loads_per_s,
        max_command_bytes=args.max_command_bytes,
        max_subscriptions_per_topic=args.max_subscriptions_per_topic,
        max_consumers_per_subscription=args.max_consumers_per_subscription,
        max_producers_per_topic=args.max_producers_per_topic,
        max_concurrent_topic_loads=args.max_concurrent_topic_loads,
    )
    try:
        asyncio.run(_serve(config, _partitioned(args.partitioned_topic)))
    except DataInUse as e:
        print(f"cursorkit broker: {e}", file=sys.stderr)
        return 2
    return 0
