"""The commands a broker sends, one builder each, with the values Pulsar's C++ client expects.

Each builder returns a complete ``BaseCommand``; :func:`~cursorkit.broker.protocol.frames.encode_command`
frames it (:func:`message` goes through ``encode_payload_command`` with the stored bytes). Error
codes are ``pulsar_api_pb2.ServerError`` values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from cursorkit.errors import InvalidArgument
from cursorkit.proto.pulsar_api_pb2 import (
    BaseCommand,
    CommandAckResponse,
    CommandActiveConsumerChange,
    CommandCloseConsumer,
    CommandCloseProducer,
    CommandConnected,
    CommandError,
    CommandGetLastMessageIdResponse,
    CommandGetSchemaResponse,
    CommandGetTopicsOfNamespaceResponse,
    CommandLookupTopicResponse,
    CommandMessage,
    CommandPartitionedTopicMetadataResponse,
    CommandPing,
    CommandPong,
    CommandProducerSuccess,
    CommandSendError,
    CommandSendReceipt,
    CommandSuccess,
    MessageIdData,
    ServerError,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "PROTOCOL_VERSION",
    "ack_response",
    "active_consumer_change",
    "close_consumer",
    "close_producer",
    "connected",
    "error",
    "get_last_message_id_response",
    "get_schema_error",
    "get_topics_of_namespace_response",
    "lookup_connect",
    "lookup_failed",
    "lookup_redirect",
    "message",
    "message_id",
    "partitioned_metadata",
    "partitioned_metadata_failed",
    "ping",
    "pong",
    "producer_success",
    "send_error",
    "send_receipt",
    "success",
]

PROTOCOL_VERSION = 20
"""The protocol version the broker announces: the client's own. Below 12 the client turns off pings (1),
redelivery requests (2), checksums (6), multi-id acks and GET_LAST_MESSAGE_ID (12)."""
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024 - 10 * 1024
"""What the client assumes when CONNECTED has no ``max_message_size`` (5 MiB less 10 KiB)."""

_T = BaseCommand


def _code(server_error: int) -> ServerError:
    """``server_error`` as a ServerError, refused unless it is one."""
    if server_error not in ServerError.values():
        raise InvalidArgument(f"{server_error!r} is not a Pulsar ServerError")
    return cast(ServerError, server_error)


def connected(
    server_version: str = "cursorkit",
    *,
    protocol_version: int = PROTOCOL_VERSION,
    max_message_size: int | None = None,
) -> BaseCommand:
    """The answer to CONNECT. The client keeps ``max_message_size`` process-wide (unset: the default)."""
    body = CommandConnected(
        server_version=server_version, protocol_version=protocol_version, max_message_size=max_message_size
    )
    return BaseCommand(type=_T.CONNECTED, connected=body)


def ping() -> BaseCommand:
    """A keep-alive probe; the client answers PONG."""
    return BaseCommand(type=_T.PING, ping=CommandPing())


def pong() -> BaseCommand:
    """The answer to a client's PING (due within about 30 s, or the client closes the connection)."""
    return BaseCommand(type=_T.PONG, pong=CommandPong())


def success(request_id: int) -> BaseCommand:
    """The answer to SUBSCRIBE, UNSUBSCRIBE, CLOSE_PRODUCER, CLOSE_CONSUMER and SEEK."""
    return BaseCommand(type=_T.SUCCESS, success=CommandSuccess(request_id=request_id))


def error(request_id: int, server_error: int, message: str) -> BaseCommand:
    """Fails the request ``request_id`` (any but lookups, which answer in their own responses)."""
    body = CommandError(request_id=request_id, error=_code(server_error), message=message)
    return BaseCommand(type=_T.ERROR, error=body)


def partitioned_metadata(request_id: int, partitions: int) -> BaseCommand:
    """A successful PARTITIONED_METADATA answer: ``partitions`` = 0 for a non-partitioned topic."""
    body = CommandPartitionedTopicMetadataResponse(
        request_id=request_id, partitions=partitions, response=CommandPartitionedTopicMetadataResponse.Success
    )
    return BaseCommand(type=_T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=body)


def partitioned_metadata_failed(request_id: int, server_error: int, message: str) -> BaseCommand:
    """A failed PARTITIONED_METADATA answer (ServiceNotReady and TooManyRequests close the connection)."""
    body = CommandPartitionedTopicMetadataResponse(
        request_id=request_id,
        response=CommandPartitionedTopicMetadataResponse.Failed,
        error=_code(server_error),
        message=message,
    )
    return BaseCommand(type=_T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=body)


def lookup_connect(
    request_id: int,
    broker_service_url: str,
    *,
    broker_service_url_tls: str | None = None,
    authoritative: bool = True,
    proxy_through_service_url: bool = False,
) -> BaseCommand:
    """A LOOKUP answer sending the client to ``broker_service_url`` (``pulsar://host:port``).

    The same string as the client's service URL reuses its connection; another one opens a new one.
    """
    body = CommandLookupTopicResponse(
        request_id=request_id,
        response=CommandLookupTopicResponse.Connect,
        brokerServiceUrl=broker_service_url,
        brokerServiceUrlTls=broker_service_url_tls,
        authoritative=authoritative,
        proxy_through_service_url=proxy_through_service_url,
    )
    return BaseCommand(type=_T.LOOKUP_RESPONSE, lookupTopicResponse=body)


def lookup_redirect(request_id: int, broker_service_url: str, *, authoritative: bool = True) -> BaseCommand:
    """A LOOKUP answer naming the topic's owner: the client asks ``broker_service_url`` again.

    The client repeats the LOOKUP there with this ``authoritative`` (up to 20 redirects); the owner
    answers Connect.
    """
    body = CommandLookupTopicResponse(
        request_id=request_id,
        response=CommandLookupTopicResponse.Redirect,
        brokerServiceUrl=broker_service_url,
        authoritative=authoritative,
        proxy_through_service_url=False,
    )
    return BaseCommand(type=_T.LOOKUP_RESPONSE, lookupTopicResponse=body)


def lookup_failed(request_id: int, server_error: int, message: str) -> BaseCommand:
    """A failed LOOKUP answer (ServiceNotReady and TooManyRequests close the connection)."""
    body = CommandLookupTopicResponse(
        request_id=request_id,
        response=CommandLookupTopicResponse.Failed,
        error=_code(server_error),
        message=message,
    )
    return BaseCommand(type=_T.LOOKUP_RESPONSE, lookupTopicResponse=body)


def producer_success(
    request_id: int,
    producer_name: str,
    *,
    last_sequence_id: int = -1,
    schema_version: bytes | None = None,
    topic_epoch: int | None = None,
    producer_ready: bool = True,
) -> BaseCommand:
    """The answer to PRODUCER. The client numbers its next message ``last_sequence_id + 1``.

    ``producer_ready=False``: the producer waits for exclusive access; a second answer to the same
    request, ready, grants it.
    """
    body = CommandProducerSuccess(
        request_id=request_id,
        producer_name=producer_name,
        last_sequence_id=last_sequence_id,
        schema_version=schema_version,
        topic_epoch=topic_epoch,
        producer_ready=None if producer_ready else False,
    )
    return BaseCommand(type=_T.PRODUCER_SUCCESS, producer_success=body)


_U64 = (1 << 64) - 1


def message_id(
    ledger_id: int,
    entry_id: int,
    *,
    partition: int | None = None,
    batch_index: int | None = None,
    batch_size: int | None = None,
    ack_set: Iterable[int] | None = None,
) -> MessageIdData:
    """A ``MessageIdData``; only the fields given are set.

    The ids are unsigned on the wire: Pulsar's "no entry" (-1, an empty topic's last entry, a
    mark-delete before the first entry) travels as 2^64 - 1, which the clients read back as -1.
    """
    return MessageIdData(
        ledgerId=ledger_id & _U64,
        entryId=entry_id & _U64,
        partition=partition,
        batch_index=batch_index,
        batch_size=batch_size,
        ack_set=ack_set,
    )


def send_receipt(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    *,
    highest_sequence_id: int | None = None,
) -> BaseCommand:
    """The receipt of a SEND: due in send order, echoing its ``sequence_id``."""
    body = CommandSendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=message_id(ledger_id, entry_id),
        highest_sequence_id=highest_sequence_id,
    )
    return BaseCommand(type=_T.SEND_RECEIPT, send_receipt=body)


def send_error(producer_id: int, sequence_id: int, server_error: int, message: str) -> BaseCommand:
    """Fails a SEND. ``ChecksumError`` fails that message only; any other closes the connection."""
    body = CommandSendError(
        producer_id=producer_id,
        sequence_id=sequence_id,
        error=_code(server_error),
        message=message,
    )
    return BaseCommand(type=_T.SEND_ERROR, send_error=body)


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    *,
    redelivery_count: int = 0,
    ack_set: Iterable[int] | None = None,
    partition: int | None = None,
) -> BaseCommand:
    """The MESSAGE command that delivers one stored entry (framed with its stored bytes).

    ``ack_set``: BitSet words of a partly acked batch, a set bit for each index still to deliver.
    """
    body = CommandMessage(
        consumer_id=consumer_id,
        message_id=message_id(ledger_id, entry_id, partition=partition),
        redelivery_count=redelivery_count,
        ack_set=ack_set,
    )
    return BaseCommand(type=_T.MESSAGE, message=body)


def ack_response(
    consumer_id: int, request_id: int, *, server_error: int | None = None, message: str | None = None
) -> BaseCommand:
    """The answer to an ACK that carries a ``request_id`` (only with ack receipts, never from Python)."""
    body = CommandAckResponse(
        consumer_id=consumer_id,
        request_id=request_id,
        error=None if server_error is None else _code(server_error),
        message=message,
    )
    return BaseCommand(type=_T.ACK_RESPONSE, ackResponse=body)


def close_producer(
    producer_id: int, request_id: int, *, assigned_broker_url: str | None = None
) -> BaseCommand:
    """Detaches a producer; it returns after a new lookup (or at once at ``assigned_broker_url``)."""
    body = CommandCloseProducer(
        producer_id=producer_id, request_id=request_id, assignedBrokerServiceUrl=assigned_broker_url
    )
    return BaseCommand(type=_T.CLOSE_PRODUCER, close_producer=body)


def close_consumer(
    consumer_id: int, request_id: int, *, assigned_broker_url: str | None = None
) -> BaseCommand:
    """Detaches a consumer; it resubscribes after a new lookup (or at once at ``assigned_broker_url``)."""
    body = CommandCloseConsumer(
        consumer_id=consumer_id, request_id=request_id, assignedBrokerServiceUrl=assigned_broker_url
    )
    return BaseCommand(type=_T.CLOSE_CONSUMER, close_consumer=body)


def get_last_message_id_response(
    request_id: int, last: MessageIdData, *, mark_delete: MessageIdData | None = None
) -> BaseCommand:
    """The answer to GET_LAST_MESSAGE_ID (``last``: the topic's last message, ``entryId`` -1 if none)."""
    body = CommandGetLastMessageIdResponse(
        request_id=request_id, last_message_id=last, consumer_mark_delete_position=mark_delete
    )
    return BaseCommand(type=_T.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=body)


def active_consumer_change(consumer_id: int, is_active: bool) -> BaseCommand:
    """Tells a Failover or Exclusive consumer whether it is the active one."""
    body = CommandActiveConsumerChange(consumer_id=consumer_id, is_active=is_active)
    return BaseCommand(type=_T.ACTIVE_CONSUMER_CHANGE, active_consumer_change=body)


def get_schema_error(request_id: int, server_error: int, message: str) -> BaseCommand:
    """A GET_SCHEMA answer without schema (this broker keeps none): e.g. ``TopicNotFound``."""
    body = CommandGetSchemaResponse(
        request_id=request_id,
        error_code=_code(server_error),
        error_message=message,
    )
    return BaseCommand(type=_T.GET_SCHEMA_RESPONSE, getSchemaResponse=body)


def get_topics_of_namespace_response(
    request_id: int,
    topics: Iterable[str],
    *,
    filtered: bool = False,
    topics_hash: str | None = None,
    changed: bool = True,
) -> BaseCommand:
    """The answer to GET_TOPICS_OF_NAMESPACE (a regex subscription's poll): full topic names.

    ``filtered``: the client's pattern was applied here; ``changed=False``: the client's hash is
    current, and no names are sent.
    """
    body = CommandGetTopicsOfNamespaceResponse(
        request_id=request_id, topics=topics, filtered=filtered, topics_hash=topics_hash, changed=changed
    )
    return BaseCommand(type=_T.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=body)
