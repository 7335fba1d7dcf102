from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CursorkitState(_message.Message):
    __slots__ = ("format_version", "owner_epoch", "sequence", "owner", "state", "ranges_total", "batches_total", "written_at_ms", "cursor_name", "batch_sizes", "redelivery_counts", "redelivery_runs_left_out")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RANGES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BATCHES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_COUNTS_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_RUNS_LEFT_OUT_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    owner_epoch: int
    sequence: int
    owner: str
    state: StateObject
    ranges_total: int
    batches_total: int
    written_at_ms: int
    cursor_name: str
    batch_sizes: _containers.RepeatedScalarFieldContainer[int]
    redelivery_counts: bytes
    redelivery_runs_left_out: int
    def __init__(self, format_version: _Optional[int] = ..., owner_epoch: _Optional[int] = ..., sequence: _Optional[int] = ..., owner: _Optional[str] = ..., state: _Optional[_Union[StateObject, _Mapping]] = ..., ranges_total: _Optional[int] = ..., batches_total: _Optional[int] = ..., written_at_ms: _Optional[int] = ..., cursor_name: _Optional[str] = ..., batch_sizes: _Optional[_Iterable[int]] = ..., redelivery_counts: _Optional[bytes] = ..., redelivery_runs_left_out: _Optional[int] = ...) -> None: ...

class StateObject(_message.Message):
    __slots__ = ("key", "size", "sha256")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    key: str
    size: int
    sha256: bytes
    def __init__(self, key: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[bytes] = ...) -> None: ...
