"""Batches: a hand-built batch splits into its messages, pack and split are inverse, damage is refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit.broker.protocol.batches import SingleMessage, entries_in, is_batch, pack_batch, split_batch
from cursorkit.broker.protocol.frames import pack_stored
from cursorkit.errors import InvalidArgument, ProtocolError
from cursorkit.proto.pulsar_api_pb2 import LZ4, KeyValue, MessageMetadata, ServerError, SingleMessageMetadata
from pulsar_messages import messages

U32 = struct.Struct(">I")


def batch_metadata(count: int, **fields: object) -> MessageMetadata:
    return MessageMetadata(
        producer_name="p-1", sequence_id=0, publish_time=1, num_messages_in_batch=count, **fields
    )


def test_a_hand_built_batch_of_three() -> None:
    """Bytes laid out by hand as the C++ producer writes them (the sheet's conversation A, step 5)."""
    singles = [
        SingleMessageMetadata(payload_size=2, partition_key="k0", sequence_id=0, event_time=5),
        SingleMessageMetadata(payload_size=0, sequence_id=1, properties=[KeyValue(key="a", value="b")]),
        SingleMessageMetadata(payload_size=3, ordering_key=b"o", sequence_id=2),
    ]
    payloads = [b"m0", b"", b"m-2"]
    payload = b"".join(
        U32.pack(m.ByteSize()) + m.SerializeToString() + p for m, p in zip(singles, payloads, strict=True)
    )
    stored = pack_stored(batch_metadata(3), payload)
    assert split_batch(stored) == [SingleMessage(m, p) for m, p in zip(singles, payloads, strict=True)]
    assert pack_batch(split_batch(stored)) == payload


def test_entries_in_and_is_batch() -> None:
    plain = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    assert (is_batch(plain), entries_in(plain)) == (False, 1)
    assert (is_batch(batch_metadata(1)), entries_in(batch_metadata(1))) == (True, 1)
    assert entries_in(batch_metadata(1000)) == 1000
    with pytest.raises(ProtocolError, match="num_messages_in_batch is 0"):
        entries_in(batch_metadata(0))


single_messages = messages(SingleMessageMetadata).flatmap(
    lambda m: st.binary(max_size=30).map(lambda p: SingleMessage(_sized(m, len(p)), p))
)


def _sized(metadata: SingleMessageMetadata, size: int) -> SingleMessageMetadata:
    metadata.payload_size = size
    return metadata


@given(st.lists(single_messages, min_size=1, max_size=5))
def test_pack_then_split_gives_the_messages_back(batch: list[SingleMessage]) -> None:
    stored = pack_stored(batch_metadata(len(batch)), pack_batch(batch))
    assert split_batch(stored) == batch


@given(st.lists(single_messages, min_size=1, max_size=4), st.data())
def test_damaged_batches_raise_protocol_error_only(batch: list[SingleMessage], data: st.DataObject) -> None:
    payload = bytearray(pack_batch(batch))
    count = data.draw(st.integers(1, len(batch) + 1))
    if payload and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(payload) - 1))
        if data.draw(st.booleans()):
            del payload[at:]
        else:
            payload[at] ^= data.draw(st.integers(1, 255))
    stored = pack_stored(batch_metadata(count), bytes(payload))
    try:
        split = split_batch(stored)
    except ProtocolError as e:
        assert e.server_error is None
    else:
        assert len(split) == count


def test_what_split_batch_refuses() -> None:
    one = pack_batch([SingleMessage(SingleMessageMetadata(payload_size=1), b"x")])
    with pytest.raises(ProtocolError, match="not a batch"):
        split_batch(pack_stored(MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), one))
    with pytest.raises(ProtocolError, match="LZ4-compressed") as caught:
        split_batch(pack_stored(batch_metadata(1, compression=LZ4), one))
    assert caught.value.server_error == ServerError.UnsupportedVersionError
    with pytest.raises(ProtocolError, match="ends before message 1 of 2"):
        split_batch(pack_stored(batch_metadata(2), one))
    with pytest.raises(ProtocolError, match="1 bytes after the 1 messages"):
        split_batch(pack_stored(batch_metadata(1), one + b"!"))
    with pytest.raises(ProtocolError, match="payload_size 2 overruns"):
        split_batch(pack_stored(batch_metadata(1), one[:-3] + b"\x18\x02x"))
    with pytest.raises(ProtocolError, match="does not parse"):
        split_batch(pack_stored(batch_metadata(1), U32.pack(0)))  # no payload_size
    with pytest.raises(InvalidArgument, match="payload_size 5 but 1 bytes"):
        pack_batch([SingleMessage(SingleMessageMetadata(payload_size=5), b"x")])
