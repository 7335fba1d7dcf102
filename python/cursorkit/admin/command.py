"""``cursorkit admin``: pulsar-admin's ``topics`` verbs over Pulsar's admin REST v2 paths.

``cursorkit admin [--admin-url URL] topics VERB ...`` takes the arguments ``pulsar-admin topics
VERB`` takes (topic names, ``-s``, ``-p``, ``-n``, ``-t``, ``-m``, ``-f``), so a script written for one
runs with the other. Lists print one name a line, stats print tables (``--json``: the broker's JSON
as it came), the other verbs print nothing when they succeed. Exit status: 0 done; 1 the broker
refused (its reason printed on one line, as pulsar-admin prints it); 2 unusable arguments, or no
broker answering at the URL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cursorkit.admin.names import LATEST, MessageId, parse_duration_s, parse_message_id, topic
from cursorkit.errors import CursorkitError

if TYPE_CHECKING:
    from rich.console import Console

    from cursorkit.admin.client import AdminClient

__all__ = ["add_parser", "run_admin"]

EXAMPLES = """examples:
  cursorkit admin topics list public/default
  cursorkit admin --admin-url http://127.0.0.1:8080 topics stats persistent://public/default/orders
  cursorkit admin topics create-partitioned-topic orders -p 4
  cursorkit admin topics reset-cursor orders -s billing -t 1h      the messages of the last hour again
  cursorkit admin topics expire-messages orders -s billing -t 10m
  cursorkit admin --json topics stats-internal orders | jq .cursors
exit status: 0 done, 1 the broker refused (its reason printed), 2 unusable arguments or no broker
  answering at the URL
"""

TOPIC_HELP = "persistent://tenant/namespace/topic, tenant/namespace/topic, or topic (public/default)"


def _duration(text: str) -> int:
    try:
        return parse_duration_s(text)
    except CursorkitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_duration.__name__ = "time"


def _message_id(text: str) -> MessageId:
    try:
        return parse_message_id(text)
    except CursorkitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_message_id.__name__ = "message id"


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    """The ``admin`` command and its ``topics`` verbs."""
    from cursorkit.admin.client import DEFAULT_URL

    a = sub.add_parser(
        "admin",
        help="pulsar-admin's topic verbs over a broker's admin REST API",
        description=(
            "Call Pulsar's admin REST v2 paths with pulsar-admin's verbs and arguments: list, create and\n"
            "delete topics, read their stats, and manage subscriptions (skip, expire, reset the cursor).\n"
            "Works with `cursorkit broker --http-port PORT` and with any Pulsar broker's web service."
        ),
        epilog=EXAMPLES,
        formatter_class=formatter,
    )
    a.add_argument(
        "--admin-url", default=DEFAULT_URL, metavar="URL", help="the broker's admin (web service) URL"
    )
    a.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait for each answer")
    a.add_argument("--json", action="store_true", help="print the broker's JSON answer instead of tables")
    groups = a.add_subparsers(
        dest="admin_group", required=True, metavar="GROUP", help="topics: operations on persistent topics"
    )
    t = groups.add_parser(
        "topics",
        help="operations on persistent topics",
        description="Operations on persistent topics, as pulsar-admin's `topics` command.",
        epilog=EXAMPLES,
        formatter_class=formatter,
    )
    verbs = t.add_subparsers(dest="verb", required=True, metavar="VERB", help="what to do")
    _add_verbs(verbs, formatter)


def _verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    formatter: type[argparse.HelpFormatter],
    name: str,
    text: str,
    *,
    aliases: tuple[str, ...] = (),
    namespace: bool = False,
) -> argparse.ArgumentParser:
    p = verbs.add_parser(name, help=text, description=text, aliases=list(aliases), formatter_class=formatter)
    p.set_defaults(verb=name)
    if namespace:
        p.add_argument("namespace", metavar="TENANT/NAMESPACE", help="the namespace")
    else:
        p.add_argument("topic", metavar="TOPIC", help=TOPIC_HELP)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the JSON answer")
    return p


def _subscription(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("-s", "--subscription", required=True, metavar="SUB", help=text)


def _add_verbs(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    def verb(name: str, text: str, **kw: Any) -> argparse.ArgumentParser:
        return _verb(verbs, formatter, name, text, **kw)

    verb("list", "the topics of a namespace (partitions as x-partition-N)", namespace=True)
    verb("list-partitioned-topics", "the partitioned topics of a namespace", namespace=True)
    p = verb("stats", "a topic's stats: rates, publishers, and each subscription's backlog")
    p.add_argument("-gpb", "--get-precise-backlog", action="store_true", help="ask for the precise backlog")
    p.add_argument(
        "-sbs", "--get-subscription-backlog-size", action="store_true", help="ask for each backlog's size"
    )
    p.add_argument(
        "-etb",
        "--get-earliest-time-in-backlog",
        action="store_true",
        help="ask for the earliest publish time",
    )
    p = verb("stats-internal", "a topic's internal stats: ledgers and cursors", aliases=("internal-stats",))
    p.add_argument("-m", "--metadata", action="store_true", help="include ledger metadata")
    p = verb("partitioned-stats", "a partitioned topic's stats, summed over its partitions")
    p.add_argument("--per-partition", action="store_true", help="also each partition's stats")
    p = verb("create-partitioned-topic", "create a partitioned topic")
    p.add_argument("-p", "--partitions", type=int, required=True, metavar="N", help="number of partitions")
    p = verb("update-partitioned-topic", "raise a partitioned topic's number of partitions")
    p.add_argument(
        "-p", "--partitions", type=int, required=True, metavar="N", help="new number of partitions"
    )
    p.add_argument("-f", "--force", action="store_true", help="update without validating the topic")
    verb("get-partitioned-topic-metadata", "a topic's number of partitions (0: not partitioned)")
    verb("create", "create a non-partitioned topic")
    p = verb("delete", "delete a topic (refused while it has producers or subscriptions, unless -f)")
    p.add_argument("-f", "--force", action="store_true", help="close its producers and consumers and delete")
    p = verb("delete-partitioned-topic", "delete a partitioned topic and its partitions")
    p.add_argument("-f", "--force", action="store_true", help="close its producers and consumers and delete")
    verb("subscriptions", "the subscriptions of a topic")
    verb("last-message-id", "the id of the topic's last message")
    p = verb("create-subscription", "create a durable subscription")
    _subscription(p, "the subscription to create")
    p.add_argument(
        "-m",
        "--messageId",
        dest="message_id",
        type=_message_id,
        default=LATEST,
        metavar="ID",
        help="where it starts: latest (default), earliest, or LEDGER:ENTRY",
    )
    p.add_argument("-r", "--replicated", action="store_true", help="a replicated subscription")
    p = verb("unsubscribe", "delete a subscription (refused while it has consumers, unless -f)")
    _subscription(p, "the subscription to delete")
    p.add_argument("-f", "--force", action="store_true", help="disconnect its consumers and delete")
    p = verb("skip", "skip messages of a subscription")
    _subscription(p, "the subscription")
    p.add_argument("-n", "--count", type=int, required=True, metavar="N", help="messages to skip")
    p = verb("clear-backlog", "skip every message of a subscription's backlog")
    _subscription(p, "the subscription")
    p = verb(
        "expire-messages", "acknowledge a subscription's messages older than a time, or up to a position"
    )
    _subscription(p, "the subscription")
    p.add_argument(
        "-t",
        "--expireTime",
        dest="time",
        type=_duration,
        default=None,
        metavar="TIME",
        help="older than this: seconds, or with a unit (100m, 3h, 2d, 5w)",
    )
    p.add_argument(
        "-p", "--position", type=_message_id, default=None, metavar="LEDGER:ENTRY", help="up to this position"
    )
    p.add_argument(
        "-e", "--exclude-reset-position", action="store_true", help="with -p: not the position itself"
    )
    p = verb("reset-cursor", "move a subscription back (or forward) to a time or a position")
    _subscription(p, "the subscription")
    p.add_argument(
        "-t",
        "--time",
        type=_duration,
        default=None,
        metavar="TIME",
        help="this long before now: seconds, or with a unit (100m, 3h, 2d, 5w)",
    )
    p.add_argument(
        "-m",
        "--messageId",
        dest="message_id",
        type=_message_id,
        default=None,
        metavar="ID",
        help="to this position: LEDGER:ENTRY, earliest or latest",
    )
    p.add_argument("-e", "--exclude-reset-position", action="store_true", help="with -m: start after it")


# -- running ---------------------------------------------------------------------------------------


def run_admin(args: argparse.Namespace, console: Callable[[], Console]) -> int:
    """Runs one ``cursorkit admin`` verb; the exit status (the module docstring says which)."""
    from cursorkit.admin.client import AdminClient, AdminError, AdminUnreachable

    try:
        client = AdminClient(args.admin_url, timeout=args.timeout)
        return _VERBS[args.verb](client, args, console)
    except AdminError as e:
        print(" ".join(e.reason.split()) or f"HTTP {e.status}", file=sys.stderr)
        return 1
    except AdminUnreachable as e:
        print(f"cursorkit admin: {e}", file=sys.stderr)
        return 2
    except CursorkitError as e:  # a name or argument pulsar-admin would refuse too
        print(f"cursorkit admin: {e}", file=sys.stderr)
        return 2


def _json(value: object) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _lines(values: list[str]) -> None:
    for value in values:
        print(value)


Verb = Callable[["AdminClient", argparse.Namespace, Callable[[], "Console"]], int]


def _list(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    names = c.list_topics(args.namespace)
    _json(names) if args.json else _lines(names)
    return 0


def _list_partitioned(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    names = c.list_partitioned_topics(args.namespace)
    _json(names) if args.json else _lines(names)
    return 0


def _subscriptions(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    names = c.subscriptions(args.topic)
    _json(names) if args.json else _lines(names)
    return 0


def _stats(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    stats = c.stats(
        args.topic,
        precise_backlog=args.get_precise_backlog,
        subscription_backlog_size=args.get_subscription_backlog_size,
        earliest_time_in_backlog=args.get_earliest_time_in_backlog,
    )
    if args.json:
        _json(stats)
    else:
        from cursorkit.admin.render import print_stats

        print_stats(console(), topic(args.topic).full, stats)
    return 0


def _partitioned_stats(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    stats = c.partitioned_stats(args.topic, per_partition=args.per_partition)
    if args.json:
        _json(stats)
    else:
        from cursorkit.admin.render import print_stats

        out = console()
        print_stats(out, topic(args.topic).full, stats)
        for name, part in sorted((stats.get("partitions") or {}).items()):
            print_stats(out, name, part)
    return 0


def _internal_stats(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    stats = c.internal_stats(args.topic, metadata=args.metadata)
    if args.json:
        _json(stats)
    else:
        from cursorkit.admin.render import print_internal_stats

        print_internal_stats(console(), topic(args.topic).full, stats)
    return 0


def _metadata(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    meta = c.get_partitioned_topic_metadata(args.topic)
    if args.json:
        _json(meta)
    else:
        print(f"partitions: {meta.get('partitions', 0)}")
        for key, value in sorted((meta.get("properties") or {}).items()):
            print(f"{key}: {value}")
    return 0


def _last_message_id(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
    found = c.last_message_id(args.topic)
    if args.json:
        _json(found)
    else:
        print(f"{found.get('ledgerId')}:{found.get('entryId')}")
    return 0


def _done(call: Callable[[AdminClient, argparse.Namespace], None]) -> Verb:
    """A verb that prints nothing when it succeeds (as pulsar-admin)."""

    def run(c: AdminClient, args: argparse.Namespace, console: Callable[[], Console]) -> int:
        call(c, args)
        return 0

    return run


def _expire(c: AdminClient, args: argparse.Namespace) -> None:
    if (args.time is None) == (args.position is None):
        raise _usage("expire-messages takes either -t TIME or -p LEDGER:ENTRY")
    if args.time is not None:
        c.expire_messages(args.topic, args.subscription, args.time)
    else:
        c.expire_messages_to(
            args.topic, args.subscription, args.position, excluded=args.exclude_reset_position
        )


def _reset(c: AdminClient, args: argparse.Namespace) -> None:
    if (args.time is None) == (args.message_id is None):
        raise _usage("reset-cursor takes either -t TIME or -m MESSAGE_ID")
    if args.message_id is not None:
        c.reset_cursor(
            args.topic, args.subscription, message_id=args.message_id, excluded=args.exclude_reset_position
        )
    else:  # like pulsar-admin: that long before now, by this machine's clock
        c.reset_cursor(args.topic, args.subscription, timestamp_ms=int(time.time() * 1000) - args.time * 1000)


def _usage(text: str) -> CursorkitError:
    from cursorkit.errors import InvalidArgument

    return InvalidArgument(text)


_VERBS: dict[str, Verb] = {
    "list": _list,
    "list-partitioned-topics": _list_partitioned,
    "stats": _stats,
    "stats-internal": _internal_stats,
    "partitioned-stats": _partitioned_stats,
    "get-partitioned-topic-metadata": _metadata,
    "last-message-id": _last_message_id,
    "subscriptions": _subscriptions,
    "create": _done(lambda c, a: c.create(a.topic)),
    "delete": _done(lambda c, a: c.delete(a.topic, force=a.force)),
    "create-partitioned-topic": _done(lambda c, a: c.create_partitioned_topic(a.topic, a.partitions)),
    "update-partitioned-topic": _done(
        lambda c, a: c.update_partitioned_topic(a.topic, a.partitions, force=a.force)
    ),
    "delete-partitioned-topic": _done(lambda c, a: c.delete_partitioned_topic(a.topic, force=a.force)),
    "create-subscription": _done(
        lambda c, a: c.create_subscription(
            a.topic, a.subscription, message_id=a.message_id, replicated=a.replicated
        )
    ),
    "unsubscribe": _done(lambda c, a: c.unsubscribe(a.topic, a.subscription, force=a.force)),
    "skip": _done(lambda c, a: c.skip(a.topic, a.subscription, a.count)),
    "clear-backlog": _done(lambda c, a: c.clear_backlog(a.topic, a.subscription)),
    "expire-messages": _done(_expire),
    "reset-cursor": _done(_reset),
}
