from cursorkit.proto import cursor_snapshot_pb2 as _cursor_snapshot_pb2
from cursorkit.proto import pulsar_ml_pb2 as _pulsar_ml_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LogHeader(_message.Message):
    __slots__ = ("format_version", "generation", "cursor_name")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CURSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    generation: int
    cursor_name: str
    def __init__(self, format_version: _Optional[int] = ..., generation: _Optional[int] = ..., cursor_name: _Optional[str] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("sequence", "mark_delete_ledger_id", "mark_delete_entry_id", "ledger_ids", "offsets", "lengths", "batches", "properties")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MARK_DELETE_LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    MARK_DELETE_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_IDS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    LENGTHS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    mark_delete_ledger_id: int
    mark_delete_entry_id: int
    ledger_ids: _containers.RepeatedScalarFieldContainer[int]
    offsets: _containers.RepeatedScalarFieldContainer[int]
    lengths: _containers.RepeatedScalarFieldContainer[int]
    batches: _containers.RepeatedCompositeFieldContainer[_cursor_snapshot_pb2.BatchAcks]
    properties: _containers.RepeatedCompositeFieldContainer[_pulsar_ml_pb2.LongProperty]
    def __init__(self, sequence: _Optional[int] = ..., mark_delete_ledger_id: _Optional[int] = ..., mark_delete_entry_id: _Optional[int] = ..., ledger_ids: _Optional[_Iterable[int]] = ..., offsets: _Optional[_Iterable[int]] = ..., lengths: _Optional[_Iterable[int]] = ..., batches: _Optional[_Iterable[_Union[_cursor_snapshot_pb2.BatchAcks, _Mapping]]] = ..., properties: _Optional[_Iterable[_Union[_pulsar_ml_pb2.LongProperty, _Mapping]]] = ...) -> None: ...

class StoreMeta(_message.Message):
    __slots__ = ("format_version", "generation", "cursor_name")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CURSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    generation: int
    cursor_name: str
    def __init__(self, format_version: _Optional[int] = ..., generation: _Optional[int] = ..., cursor_name: _Optional[str] = ...) -> None: ...
