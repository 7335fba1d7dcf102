"""``cursorkit admin``: pulsar-admin's topic verbs against a real broker's admin REST API.

What is delivered is checked with the official client; what the CLI prints against a raw HTTP
request to the same path. Refusals print the broker's reason on one line (exit 1), no broker at
the URL one line (exit 2), as do arguments pulsar-admin would refuse.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from cursorkit.admin import EARLIEST, LATEST, AdminClient, AdminError, AdminUnreachable
from cursorkit.admin.names import MessageId, parse_duration_s, parse_message_id, topic
from cursorkit.cli import main
from cursorkit.errors import InvalidArgument
from cursorkit.testing import LocalBroker

pulsar = pytest.importorskip("pulsar")

from pulsar_helpers import client  # noqa: E402

PREFIX = "/admin/v2/persistent/public/default"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    """One broker for the module (each test uses topics of its own)."""
    with LocalBroker(tmp_path_factory.mktemp("admin-cli") / "data") as b:
        yield b


def admin(b: LocalBroker, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``cursorkit admin --admin-url URL ARGV...``: exit status, stdout, stderr."""
    try:
        code = main(["admin", "--admin-url", b.admin_url, *argv])
    except SystemExit as e:  # argparse's refusals
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def raw(b: LocalBroker, method: str, path: str) -> tuple[int, Any]:
    """The status and JSON body of one request made without the CLI (urllib)."""
    request = urllib.request.Request(b.admin_url + path, method=method, data=b"" if method != "GET" else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- arguments, as pulsar-admin reads them (no broker needed) ------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30), ("30s", 30), ("10m", 600), ("1h", 3600), ("1H", 3600), ("2d", 172_800), ("5w", 3_024_000)],
)
def test_times_read_as_pulsar_admin_reads_them(text: str, seconds: int) -> None:
    assert parse_duration_s(text) == seconds  # a bare number is seconds (RelativeTimeUtil)


@pytest.mark.parametrize("text", ["", "m", "1.5m", "-1", "10q", "1 h h"])
def test_unusable_times_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_duration_s(text)


def test_names_and_message_ids_complete_as_pulsar_admin() -> None:
    assert topic("orders").full == "persistent://public/default/orders"
    assert topic("t/ns/orders").full == "persistent://t/ns/orders"
    assert topic("persistent://t/ns/a/b").local == "a/b"
    assert topic("a b%ü").path("subscription") == f"{PREFIX}/a%20b%25%C3%BC/subscription"
    for bad in ("t/orders", "persistent://t/orders", "kafka://t/ns/x", ""):
        with pytest.raises(InvalidArgument):
            topic(bad)
    assert parse_message_id("3:7") == MessageId(3, 7)
    assert parse_message_id("earliest") == EARLIEST and parse_message_id("latest") == LATEST
    with pytest.raises(InvalidArgument):
        parse_message_id("3")


# -- what works against the bare admin server ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "method", "path"),
    [
        (["topics", "stats", "no-such-topic"], "GET", f"{PREFIX}/no-such-topic/stats"),
        (["topics", "stats-internal", "no-such-topic"], "GET", f"{PREFIX}/no-such-topic/internalStats"),
        (["topics", "subscriptions", "no-such-topic"], "GET", f"{PREFIX}/no-such-topic/subscriptions"),
        (
            ["topics", "skip", "no-such-topic", "-s", "s", "-n", "1"],
            "POST",
            f"{PREFIX}/no-such-topic/subscription/s/skip/1",
        ),
        (["topics", "list", "no-such-tenant/ns"], "GET", "/admin/v2/persistent/no-such-tenant/ns"),
    ],
)
def test_a_refusal_prints_the_brokers_reason_on_one_line(
    broker: LocalBroker, capsys: pytest.CaptureFixture[str], argv: list[str], method: str, path: str
) -> None:
    status, body = raw(broker, method, path)
    assert status == 404 and isinstance(body, dict) and body["reason"]
    code, out, err = admin(broker, capsys, *argv)
    assert (code, out) == (1, "")
    assert err == body["reason"] + "\n"  # the reason alone, as pulsar-admin prints it


def test_no_broker_at_the_url_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code = main(["admin", "--admin-url", url, "topics", "list", "public/default"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and url in err and "Traceback" not in err
    with pytest.raises(AdminUnreachable, match="cannot reach"):
        AdminClient(url).list_topics("public/default")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["topics", "stats", "a/b"], "invalid short topic name"),
        (["topics", "list", "public"], "invalid namespace"),
        (["topics", "reset-cursor", "x", "-s", "s"], "either -t TIME or -m MESSAGE_ID"),
        (
            ["topics", "reset-cursor", "x", "-s", "s", "-t", "1h", "-m", "1:0"],
            "either -t TIME or -m MESSAGE_ID",
        ),
        (["topics", "expire-messages", "x", "-s", "s"], "either -t TIME or -p LEDGER:ENTRY"),
        (["topics", "reset-cursor", "x", "-s", "s", "-t", "10q"], "invalid time unit"),
        (["topics", "create-subscription", "x", "-s", "s", "-m", "first"], "invalid message id"),
        (["topics", "skip", "x", "-s", "s"], "-n/--count"),
        (["--admin-url", "ftp://h", "topics", "list", "a/b"], "use http://HOST:PORT"),
    ],
)
def test_unusable_arguments_exit_2_without_a_request(
    broker: LocalBroker, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = admin(broker, capsys, *argv)
    assert code == 2 and out == "" and fragment in err and "Traceback" not in err


def test_admin_help_is_quick_and_imports_no_client_or_table() -> None:
    """``--help`` builds the parser only: no http.client, rich, aiohttp, pyarrow or pyspark."""
    code = (
        "import sys, time; t = time.perf_counter(); from cursorkit.cli import main\n"
        "try:\n    main(['admin', 'topics', 'reset-cursor', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('http.client', 'rich', 'aiohttp', 'pyarrow', 'pyspark') if m in sys.modules]\n"
        "print(heavy, time.perf_counter() - t, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, took = done.stderr.strip().rsplit("] ", 1)
    assert heavy == "[" and "--messageId" in done.stdout, done.stderr
    assert float(took) < 0.5


# -- with the admin endpoints (topics, subscriptions, stats) ---------------------------------------------


def test_topics_are_created_listed_and_deleted(
    broker: LocalBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert admin(broker, capsys, "topics", "create", "made")[:2] == (0, "")
    code, _, err = admin(broker, capsys, "topics", "create", "made")
    assert code == 1 and err.strip() == raw(broker, "PUT", f"{PREFIX}/made")[1]["reason"]  # 409
    code, out, _ = admin(broker, capsys, "topics", "list", "public/default")
    assert code == 0 and "persistent://public/default/made" in out.splitlines()
    code, out, _ = admin(broker, capsys, "topics", "list", "public/default", "--json")
    assert json.loads(out) == raw(broker, "GET", PREFIX)[1]
    assert admin(broker, capsys, "topics", "delete", "made")[0] == 0
    assert (
        "persistent://public/default/made" not in admin(broker, capsys, "topics", "list", "public/default")[1]
    )

    assert admin(broker, capsys, "topics", "create-partitioned-topic", "parts", "-p", "3")[0] == 0
    assert admin(broker, capsys, "topics", "get-partitioned-topic-metadata", "parts")[1] == "partitions: 3\n"
    assert admin(broker, capsys, "topics", "update-partitioned-topic", "parts", "-p", "4")[0] == 0
    code, out, _ = admin(broker, capsys, "--json", "topics", "get-partitioned-topic-metadata", "parts")
    assert json.loads(out)["partitions"] == 4
    assert (
        "persistent://public/default/parts"
        in admin(broker, capsys, "topics", "list-partitioned-topics", "public/default")[1]
    )
    code, _, err = admin(broker, capsys, "topics", "create-partitioned-topic", "zero", "-p", "0")
    assert code == 1 and err.strip()  # 406, the broker's reason
    assert admin(broker, capsys, "topics", "delete-partitioned-topic", "parts")[0] == 0
    assert "parts" not in admin(broker, capsys, "topics", "list-partitioned-topics", "public/default")[1]


def _produce(b: LocalBroker, name: str, n: int) -> None:
    c = client(b.service_url)
    try:
        producer = c.create_producer(name, batching_enabled=False)
        for i in range(n):
            producer.send(f"m{i}".encode())
    finally:
        c.close()


def _first(b: LocalBroker, name: str, sub: str) -> bytes | None:
    """The next message the subscription delivers (None when nothing comes), left unacknowledged."""
    c = client(b.service_url)
    try:
        consumer = c.subscribe(name, sub, consumer_type=pulsar.ConsumerType.Shared)
        try:
            return bytes(consumer.receive(timeout_millis=2000).data())
        except pulsar.Timeout:
            return None
    finally:
        c.close()


def test_subscription_verbs_move_the_cursor(broker: LocalBroker, capsys: pytest.CaptureFixture[str]) -> None:
    name = "moves"
    assert admin(broker, capsys, "topics", "create-subscription", name, "-s", "s", "-m", "earliest")[0] == 0
    code, _, err = admin(broker, capsys, "topics", "create-subscription", name, "-s", "s")
    assert code == 1 and err.strip()  # 409: it exists
    assert admin(broker, capsys, "topics", "subscriptions", name)[1] == "s\n"
    _produce(broker, name, 6)
    assert admin(broker, capsys, "topics", "skip", name, "-s", "s", "-n", "2")[0] == 0
    assert _first(broker, name, "s") == b"m2"
    assert admin(broker, capsys, "topics", "clear-backlog", name, "-s", "s")[0] == 0
    assert _first(broker, name, "s") is None
    assert admin(broker, capsys, "topics", "reset-cursor", name, "-s", "s", "-m", "earliest")[0] == 0
    assert _first(broker, name, "s") == b"m0"
    assert admin(broker, capsys, "topics", "expire-messages", name, "-s", "s", "-t", "1h")[0] == 0
    assert _first(broker, name, "s") == b"m0"  # nothing is an hour old
    time.sleep(1.1)
    assert admin(broker, capsys, "topics", "expire-messages", name, "-s", "s", "-t", "1")[0] == 0
    assert _first(broker, name, "s") is None  # all over a second old (-t 0 would expire nothing: TTL off)
    assert admin(broker, capsys, "topics", "reset-cursor", name, "-s", "s", "-t", "1h")[0] == 0
    assert _first(broker, name, "s") == b"m0"  # published within the hour: all of them again
    assert admin(broker, capsys, "topics", "unsubscribe", name, "-s", "s")[0] == 0
    assert admin(broker, capsys, "topics", "subscriptions", name)[1] == ""


def test_reset_and_expire_to_a_position(broker: LocalBroker, capsys: pytest.CaptureFixture[str]) -> None:
    name = "positions"
    assert admin(broker, capsys, "topics", "create-subscription", name, "-s", "s", "-m", "earliest")[0] == 0
    _produce(broker, name, 4)
    last = AdminClient(broker.admin_url).last_message_id(name)
    ledger = last["ledgerId"]
    assert admin(broker, capsys, "topics", "last-message-id", name)[1] == f"{ledger}:{last['entryId']}\n"
    assert admin(broker, capsys, "topics", "reset-cursor", name, "-s", "s", "-m", f"{ledger}:2")[0] == 0
    assert _first(broker, name, "s") == b"m2"
    assert admin(broker, capsys, "topics", "reset-cursor", name, "-s", "s", "-m", f"{ledger}:2", "-e")[0] == 0
    assert _first(broker, name, "s") == b"m3"  # excluded: after it
    assert admin(broker, capsys, "topics", "reset-cursor", name, "-s", "s", "-m", "earliest")[0] == 0
    assert admin(broker, capsys, "topics", "expire-messages", name, "-s", "s", "-p", f"{ledger}:1")[0] == 0
    assert _first(broker, name, "s") == b"m2"


def test_unsubscribe_with_consumers_needs_force(
    broker: LocalBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    c = client(broker.service_url)
    try:
        consumer = c.subscribe("busy", "held", consumer_type=pulsar.ConsumerType.Shared)
        code, _, err = admin(broker, capsys, "topics", "unsubscribe", "busy", "-s", "held")
        assert code == 1 and err.count("\n") == 1  # 412: active consumers
        assert admin(broker, capsys, "topics", "unsubscribe", "busy", "-s", "held", "-f")[0] == 0
        assert admin(broker, capsys, "topics", "subscriptions", "busy")[1] == ""
        del consumer
    finally:
        c.close()


def test_names_with_spaces_and_unicode_reach_the_broker_intact(
    broker: LocalBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = "billing team/ü 100%"
    assert (
        admin(broker, capsys, "topics", "create-subscription", "names", "-s", sub, "-m", "earliest")[0] == 0
    )
    _produce(broker, "names", 1)
    assert _first(broker, "names", sub) == b"m0"  # the client's subscription is the one the CLI made
    assert admin(broker, capsys, "topics", "subscriptions", "names")[1] == f"{sub}\n"


def test_stats_table_shows_each_subscription(broker: LocalBroker, capsys: pytest.CaptureFixture[str]) -> None:
    name = "stats-table"
    for sub in ("alpha", "beta"):
        admin(broker, capsys, "topics", "create-subscription", name, "-s", sub, "-m", "earliest")
    _produce(broker, name, 5)
    admin(broker, capsys, "topics", "skip", name, "-s", "beta", "-n", "3")
    code, out, _ = admin(broker, capsys, "topics", "stats", name)
    assert code == 0 and "persistent://public/default/stats-table" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "5" in rows["alpha"].split("│")[3] and "2" in rows["beta"].split("│")[3]  # backlog column
    code, out, _ = admin(broker, capsys, "topics", "stats", name, "--json")
    stats = json.loads(out)
    assert (
        stats["subscriptions"]["alpha"]["msgBacklog"] == 5
        and stats["subscriptions"]["beta"]["msgBacklog"] == 2
    )


def test_internal_stats_table_shows_cursors(broker: LocalBroker, capsys: pytest.CaptureFixture[str]) -> None:
    name = "internal-table"
    admin(broker, capsys, "topics", "create-subscription", name, "-s", "reader", "-m", "earliest")
    _produce(broker, name, 3)
    admin(broker, capsys, "topics", "skip", name, "-s", "reader", "-n", "1")
    code, out, _ = admin(broker, capsys, "--json", "topics", "internal-stats", name)
    cursor = json.loads(out)["cursors"]["reader"]
    code, out, _ = admin(broker, capsys, "topics", "stats-internal", name)
    assert code == 0 and "Cursors" in out and "reader" in out and cursor["markDeletePosition"] in out


def test_a_restart_keeps_what_the_cli_did(broker: LocalBroker, capsys: pytest.CaptureFixture[str]) -> None:
    name = "kept"
    admin(broker, capsys, "topics", "create-subscription", name, "-s", "s", "-m", "earliest")
    _produce(broker, name, 3)
    assert admin(broker, capsys, "topics", "skip", name, "-s", "s", "-n", "2")[0] == 0
    broker.restart()
    assert _first(broker, name, "s") == b"m2"


def test_client_errors_carry_status_and_reason(broker: LocalBroker) -> None:
    with pytest.raises(AdminError) as refused:
        AdminClient(broker.admin_url).stats("never-made")
    assert refused.value.status == 404 and refused.value.reason


def test_the_default_url_and_verb_aliases() -> None:
    """Without ``--admin-url`` it asks pulsar-admin's default; ``internal-stats`` is ``stats-internal``."""
    from cursorkit.cli import parser

    args = parser().parse_args(["admin", "topics", "list", "public/default"])
    assert args.admin_url == "http://127.0.0.1:8080" and args.verb == "list" and not args.json
    args = parser().parse_args(["admin", "topics", "internal-stats", "x", "--json"])
    assert args.verb == "stats-internal" and args.json
