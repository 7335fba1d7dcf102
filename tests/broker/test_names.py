"""Names as data: Pulsar's naming rules, and the total, injective mapping of names to directories."""

from __future__ import annotations

import asyncio
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit import CursorStore
from cursorkit.broker.server import paths
from cursorkit.broker.server.config import BrokerConfig
from cursorkit.broker.server.names import namespace_name, subscription_name, topic_name
from cursorkit.broker.server.paths import (
    NAME_FILE,
    ensure_directory,
    listed_subscription,
    segment_component,
    subscription_component,
    topic_directory,
)
from cursorkit.broker.server.topic import Topic
from cursorkit.errors import DamagedStore, InvalidArgument, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

_PLAIN = "abcXYZ019_.=:-"
_PLAIN_CHARS = frozenset(string.ascii_letters + string.digits + "_.=:-")
names = st.text(min_size=1, max_size=400)
"""Any non-empty name (Hypothesis leaves lone surrogates out: protobuf strings are UTF-8)."""
plain_segments = st.text(alphabet=_PLAIN, min_size=1, max_size=300)
segments = st.one_of(names, plain_segments)
subscriptions = st.one_of(names, st.text(alphabet="ab\x00/.é", min_size=1, max_size=200))


def _single_component(component: str) -> None:
    assert component not in ("", ".", "..")
    assert "/" not in component and "\x00" not in component
    assert len(component.encode()) <= paths.MAX_COMPONENT


@given(st.lists(segments, min_size=2, max_size=6, unique=True))
def test_segments_map_to_distinct_single_components(given_segments: list[str]) -> None:
    components = [segment_component(s) for s in given_segments]
    for c in components:
        _single_component(c)
    assert len(set(components)) == len(components)


@given(st.lists(subscriptions, min_size=2, max_size=6, unique=True))
def test_subscriptions_map_to_distinct_single_components(names_: list[str]) -> None:
    components = [subscription_component(n) for n in names_]
    for c in components:
        _single_component(c)
    assert len(set(components)) == len(components)


@given(plain_segments)
def test_a_plain_segment_keeps_its_directory(segment: str) -> None:
    short = len(segment) <= 255 and segment not in (".", "..")
    assert (segment_component(segment) == segment) is short


@given(names)
def test_a_subscription_up_to_127_bytes_keeps_its_hex_directory(name: str) -> None:
    raw = name.encode()
    assert (subscription_component(name) == raw.hex()) is (len(raw) <= 127)


def test_a_short_form_and_a_long_form_never_meet() -> None:
    """``~`` opens every long form; no short form holds it (a segment with ``~`` goes long)."""
    assert segment_component("~" + "0" * 64).startswith("~")
    assert segment_component("~" + "0" * 64) != "~" + "0" * 64
    assert segment_component(".") != "." and segment_component("..") != ".."


@pytest.mark.parametrize("empty", ["", b"x", None])
def test_an_empty_or_non_text_name_has_no_directory(empty: object) -> None:
    with pytest.raises((InvalidArgument, TypeError)):
        subscription_component(empty)  # type: ignore[arg-type]
    with pytest.raises((InvalidArgument, TypeError)):
        segment_component(empty)  # type: ignore[arg-type]


@given(st.lists(subscriptions, min_size=1, max_size=5, unique=True))
def test_directories_list_back_the_names_they_were_made_for(names_: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        parent = Path(d) / "subscriptions"
        for n in names_:
            made = ensure_directory(parent, subscription_component(n), n, sync=False)
            assert made.parent == parent
            (made / "cursor").mkdir()
            assert ensure_directory(parent, subscription_component(n), n, sync=False) == made
        listed = sorted(listed_subscription(p) for p in parent.iterdir())
        assert listed == sorted(names_)
        assert [p.name for p in Path(d).iterdir()] == ["subscriptions"]  # nothing outside its parent


def test_a_hash_collision_is_refused_never_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a hash that collides, the second name is refused and the first keeps its directory."""
    monkeypatch.setattr(paths, "_long", lambda raw: "~" + "0" * 64)
    first, second = "a" * 200, "b" * 200
    made = ensure_directory(tmp_path, subscription_component(first), first, sync=False)
    assert (made / NAME_FILE).read_text() == first
    with pytest.raises(DamagedStore, match="holds"):
        ensure_directory(tmp_path, subscription_component(second), second, sync=False)
    assert listed_subscription(made) == first


def test_a_name_file_for_another_directory_is_damage(tmp_path: Path) -> None:
    long = "s" * 200
    made = ensure_directory(tmp_path, subscription_component(long), long, sync=False)
    (made / NAME_FILE).write_text("t" * 200)
    with pytest.raises(DamagedStore):
        listed_subscription(made)
    with pytest.raises(DamagedStore):
        ensure_directory(tmp_path, subscription_component(long), long, sync=False)


@pytest.mark.parametrize("foreign", ["zz", "ABCD", "~" + "0" * 64, "ff"])
def test_a_cursor_in_a_foreign_directory_is_damage_not_a_crash(tmp_path: Path, foreign: str) -> None:
    (tmp_path / foreign / "cursor").mkdir(parents=True)
    with pytest.raises(DamagedStore):
        listed_subscription(tmp_path / foreign)


def test_topic_directories_are_one_component_per_segment(tmp_path: Path) -> None:
    name = topic_name("persistent://public/default/" + "t" * 300)
    made = topic_directory(tmp_path, name.segments, sync=False)
    assert made.relative_to(tmp_path).as_posix() == name.directory
    assert made.parent == tmp_path / "public" / "default"
    assert (made / NAME_FILE).read_text() == "t" * 300
    assert topic_name("persistent://a/b/c").directory == "a/b/c"  # today's layout


# -- Pulsar's naming rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "refused", ["", " ", "\t\n", "\u2003", "\x1f", "pulsar.dedup", "pulsar.repl", "pulsar.repl.x", b"\xff"]
)
def test_blank_reserved_and_non_text_subscription_names_are_producer_busy(refused: object) -> None:
    with pytest.raises(ProtocolError) as e:
        subscription_name(refused)
    assert e.value.server_error == api.ProducerBusy


@pytest.mark.parametrize("accepted", ["s", "\xa0", " s ", "pulsar.dedup2", "a/../b", "\x00", "x" * 500])
def test_other_subscription_names_are_accepted(accepted: str) -> None:
    assert subscription_name(accepted) == accepted


@given(st.text(min_size=1, max_size=300).filter(lambda s: "/" not in s and s not in (".", "..")))
def test_every_local_name_pulsar_accepts_is_a_topic(local: str) -> None:
    name = topic_name(f"persistent://public/default/{local}")
    assert name.local == local
    assert name.directory.split("/")[2] == segment_component(local)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "persistent://a/b/",
        "persistent://a/b",
        "persistent://",
        "persistent:///b/c",
        "persistent://a//c",
        "memory://a/b/c",
        "://a/b/c",
        "a b/ns/t",
        "a/b",
        "a//b/c",
        "non-persistent://a b/ns/t",
        "persistent://a/c/b/",
        b"\xff",
    ],
)
def test_names_pulsar_refuses_are_invalid_topic_names(bad: object) -> None:
    with pytest.raises(ProtocolError) as e:
        topic_name(bad)
    assert e.value.server_error == api.InvalidTopicName


@pytest.mark.parametrize(
    "not_served",
    [
        "non-persistent://public/default/x",
        "NON-PERSISTENT://public/default/x",
        "persistent://public/cluster/default/x",
        "persistent://a/c/n/t/with/slashes",
        "x" * 1000,
        "persistent://public/default/" + "t" * 997,
    ],
)
def test_names_pulsar_accepts_and_this_broker_does_not_serve_are_not_allowed(not_served: str) -> None:
    """NotAllowedError, which the C++ client does not retry (InvalidTopicName it retries for 30 s)."""
    with pytest.raises(ProtocolError) as e:
        topic_name(not_served)
    assert e.value.server_error == api.NotAllowedError
    assert "not served" in str(e.value)


@pytest.mark.parametrize(
    ("given", "full"),
    [
        ("t@1", "persistent://public/default/t@1"),
        ("a+b", "persistent://public/default/a+b"),
        ("café", "persistent://public/default/café"),
        ("x=y:z.w-v_u", "persistent://public/default/x=y:z.w-v_u"),
        ("a%2Fb?c#d", "persistent://public/default/a%2Fb?c#d"),
        ("/t/", "persistent://public/default/t"),
        ("te-nant/n.s/t", "persistent://te-nant/n.s/t"),
        ("PERSISTENT://public/default/t", "persistent://public/default/t"),
        ("persistent://public/default/..", "persistent://public/default/.."),
        ("persistent://./../x", "persistent://./../x"),
        ("persistent://public/default/" + "t" * 996, "persistent://public/default/" + "t" * 996),
    ],
)
def test_names_pulsar_accepts_are_topics(given: str, full: str) -> None:
    name = topic_name(given)
    assert name.full == full
    for segment, component in zip(name.segments, name.directory.split("/"), strict=True):
        _single_component(component)
        plain = segment not in (".", "..") and all(c in _PLAIN_CHARS for c in segment) and len(segment) <= 255
        assert (component == segment) is plain


def test_names_with_any_character_get_distinct_directories() -> None:
    locals_ = ["t@1", "a+b", "café", "cafe\u0301", "a b", "a/b".replace("/", "%2F"), ".", "..", "~name", "t"]
    components = [topic_name(f"persistent://public/default/{n}").directory.split("/")[2] for n in locals_]
    assert len(set(components)) == len(components)
    assert components[-1] == "t"  # a plain name keeps its directory, as earlier versions wrote it


@pytest.mark.parametrize(
    ("given", "expected"),
    [("public/default", ("public", "default")), ("a-b/c.d=e:f_", ("a-b", "c.d=e:f_")), ("t/n/", ("t", "n"))],
)
def test_namespaces_are_read_as_pulsar_reads_them(given: str, expected: tuple[str, str]) -> None:
    assert namespace_name(given) == expected


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("public", api.InvalidTopicName),
        ("", api.InvalidTopicName),
        ("a b/c", api.InvalidTopicName),
        ("t//n", api.InvalidTopicName),
        ("t/n/x/y", api.InvalidTopicName),
        (b"\xff", api.InvalidTopicName),
        ("t/cluster/n", api.NotAllowedError),
    ],
)
def test_namespaces_pulsar_refuses_or_this_broker_does_not_serve(given: object, error: int) -> None:
    with pytest.raises(ProtocolError) as e:
        namespace_name(given)
    assert e.value.server_error == error


@pytest.mark.parametrize(
    ("local", "partition"),
    [
        ("t-partition-3", 3),
        ("t-partition-03", None),
        ("t-partition-3\n", None),
        ("t-partition-\u0663", None),
        ("t-partition-2147483648", None),
        ("t-partition-1-partition-2", 2),
    ],
)
def test_partitions_are_read_as_pulsar_reads_them(local: str, partition: int | None) -> None:
    name = topic_name(f"persistent://public/default/{local}")
    assert name.partition == partition
    if partition is not None:
        assert name.base.partition_name(partition) == name


# -- the layout earlier versions wrote ---------------------------------------------------------------


def test_a_data_directory_in_the_old_layout_still_opens(tmp_path: Path) -> None:
    """``topics/<tenant>/<ns>/<local>/subscriptions/<hex of name>/cursor``, made by hand, opens."""
    sub_dir = tmp_path / "topics" / "public" / "default" / "old" / "subscriptions" / b"sub-1".hex()
    CursorStore.create(sub_dir / "cursor", name="sub-1").close()

    async def reopen() -> tuple[list[str], Path]:
        topic = Topic(topic_name("old"), tmp_path, BrokerConfig(data=tmp_path, sync=False))
        try:
            return sorted(topic.subscriptions), topic.subscriptions["sub-1"].directory
        finally:
            topic.close()

    subs, directory = asyncio.run(reopen())
    assert subs == ["sub-1"] and directory == sub_dir
    assert not list(sub_dir.glob(NAME_FILE))  # a short name gets no name file
