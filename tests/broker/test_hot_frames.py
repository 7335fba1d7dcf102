"""The MESSAGE and SEND_RECEIPT frames built in Rust are byte for byte what protobuf builds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cursorkit.broker.protocol import commands
from cursorkit.broker.protocol.frames import FrameDecoder, encode_command, encode_payload_command, pack_stored
from cursorkit.broker.protocol.hot_frames import entry_fields, message_frame, send_receipt_frame
from cursorkit.proto import pulsar_api_pb2 as api

u64 = st.integers(0, 2**64 - 1)
ledgers = st.one_of(st.integers(0, 2**63 - 1), st.just(0))
entries = st.one_of(st.integers(-1, 2**63 - 1), st.just(-1))  # -1 travels as 2^64 - 1


@given(
    consumer_id=u64,
    ledger=ledgers,
    entry=entries,
    count=st.integers(0, 2**32 - 1),
    ack_set=st.one_of(st.none(), st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=4)),
    payload=st.binary(max_size=64),
)
def test_message_frame_is_protobufs(
    consumer_id: int, ledger: int, entry: int, count: int, ack_set: list[int] | None, payload: bytes
) -> None:
    stored = pack_stored(api.MessageMetadata(producer_name="p", sequence_id=1, publish_time=5), payload)
    ours = message_frame(consumer_id, ledger, entry, count, stored, ack_set)
    cmd = commands.message(consumer_id, ledger, entry, redelivery_count=count, ack_set=ack_set)
    assert ours == encode_payload_command(cmd, stored)
    (frame,) = FrameDecoder(max_frame_size=1 << 20).feed(ours)
    assert frame.payload is not None and frame.payload.checksum_ok


@given(producer_id=u64, sequence_id=u64, ledger=ledgers, entry=entries)
def test_send_receipt_frame_is_protobufs(producer_id: int, sequence_id: int, ledger: int, entry: int) -> None:
    ours = send_receipt_frame(producer_id, sequence_id, ledger, entry)
    assert ours == encode_command(commands.send_receipt(producer_id, sequence_id, ledger, entry))


@given(
    partition_key=st.one_of(st.none(), st.text(max_size=8)),
    ordering_key=st.one_of(st.none(), st.binary(max_size=8)),
    deliver_at=st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    payload=st.binary(max_size=16),
)
def test_entry_fields_are_what_protobuf_reads(
    partition_key: str | None, ordering_key: bytes | None, deliver_at: int | None, payload: bytes
) -> None:
    meta = api.MessageMetadata(producer_name="p", sequence_id=1, publish_time=5)
    meta.properties.add(key="k", value="v")
    if partition_key is not None:
        meta.partition_key = partition_key
    if ordering_key is not None:
        meta.ordering_key = ordering_key
    if deliver_at is not None:
        meta.deliver_at_time = deliver_at
    stored = pack_stored(meta, payload)
    key = ordering_key if ordering_key is not None else (partition_key or "").encode()
    assert entry_fields([stored, b"\x00\x00\x00\x09\x0a"]) == ([deliver_at or 0, 0], [key, b""])
