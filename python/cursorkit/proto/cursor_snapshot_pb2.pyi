from cursorkit.proto import pulsar_ml_pb2 as _pulsar_ml_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LedgerAcks(_message.Message):
    __slots__ = ("ledger_id", "bitmap")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    BITMAP_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    bitmap: bytes
    def __init__(self, ledger_id: _Optional[int] = ..., bitmap: _Optional[bytes] = ...) -> None: ...

class BatchAcks(_message.Message):
    __slots__ = ("ledger_id", "entry_id", "batch_size", "unacked_words")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    UNACKED_WORDS_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    batch_size: int
    unacked_words: bytes
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., batch_size: _Optional[int] = ..., unacked_words: _Optional[bytes] = ...) -> None: ...

class CursorSnapshot(_message.Message):
    __slots__ = ("version", "mark_delete_ledger_id", "mark_delete_entry_id", "ledgers", "batches", "properties", "truncated_ledgers", "truncated_batches", "checksum")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MARK_DELETE_LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MARK_DELETE_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_LEDGERS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    version: int
    mark_delete_ledger_id: int
    mark_delete_entry_id: int
    ledgers: _containers.RepeatedCompositeFieldContainer[LedgerAcks]
    batches: _containers.RepeatedCompositeFieldContainer[BatchAcks]
    properties: _containers.RepeatedCompositeFieldContainer[_pulsar_ml_pb2.LongProperty]
    truncated_ledgers: int
    truncated_batches: int
    checksum: int
    def __init__(self, version: _Optional[int] = ..., mark_delete_ledger_id: _Optional[int] = ..., mark_delete_entry_id: _Optional[int] = ..., ledgers: _Optional[_Iterable[_Union[LedgerAcks, _Mapping]]] = ..., batches: _Optional[_Iterable[_Union[BatchAcks, _Mapping]]] = ..., properties: _Optional[_Iterable[_Union[_pulsar_ml_pb2.LongProperty, _Mapping]]] = ..., truncated_ledgers: _Optional[int] = ..., truncated_batches: _Optional[int] = ..., checksum: _Optional[int] = ...) -> None: ...
