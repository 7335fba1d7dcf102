from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DelayedOperationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELAY: _ClassVar[DelayedOperationType]
    CANCEL: _ClassVar[DelayedOperationType]
DELAY: DelayedOperationType
CANCEL: DelayedOperationType

class DelayedIndex(_message.Message):
    __slots__ = ("timestamp", "ledger_id", "entry_id", "delayed_operation_type")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    DELAYED_OPERATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    ledger_id: int
    entry_id: int
    delayed_operation_type: DelayedOperationType
    def __init__(self, timestamp: _Optional[int] = ..., ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., delayed_operation_type: _Optional[_Union[DelayedOperationType, str]] = ...) -> None: ...

class SnapshotSegment(_message.Message):
    __slots__ = ("indexes",)
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    indexes: _containers.RepeatedCompositeFieldContainer[DelayedIndex]
    def __init__(self, indexes: _Optional[_Iterable[_Union[DelayedIndex, _Mapping]]] = ...) -> None: ...

class SnapshotSegmentMetadata(_message.Message):
    __slots__ = ("delayed_index_bit_map", "max_schedule_timestamp", "min_schedule_timestamp")
    class DelayedIndexBitMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: bytes
        def __init__(self, key: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...
    DELAYED_INDEX_BIT_MAP_FIELD_NUMBER: _ClassVar[int]
    MAX_SCHEDULE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MIN_SCHEDULE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    delayed_index_bit_map: _containers.ScalarMap[int, bytes]
    max_schedule_timestamp: int
    min_schedule_timestamp: int
    def __init__(self, delayed_index_bit_map: _Optional[_Mapping[int, bytes]] = ..., max_schedule_timestamp: _Optional[int] = ..., min_schedule_timestamp: _Optional[int] = ...) -> None: ...

class SnapshotMetadata(_message.Message):
    __slots__ = ("metadata_list",)
    METADATA_LIST_FIELD_NUMBER: _ClassVar[int]
    metadata_list: _containers.RepeatedCompositeFieldContainer[SnapshotSegmentMetadata]
    def __init__(self, metadata_list: _Optional[_Iterable[_Union[SnapshotSegmentMetadata, _Mapping]]] = ...) -> None: ...
