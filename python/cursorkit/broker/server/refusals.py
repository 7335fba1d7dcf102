"""How a refused command is answered, in Pulsar's forms: ERROR with its request id, or the command's own.

A command without a request id (ACK without receipts, FLOW, REDELIVER...) has nothing to answer:
the broker logs the refusal and ignores the command, as Pulsar does; only framing errors close a
connection.
"""

from __future__ import annotations

from cursorkit.broker.protocol import commands
from cursorkit.errors import CursorkitError, ProtocolError
from cursorkit.proto import pulsar_api_pb2 as api

__all__ = ["command_name", "failure", "refusal", "request_id"]

_T = api.BaseCommand


def refusal(cmd: api.BaseCommand, error: int, message: str) -> api.BaseCommand | None:
    """The answer refusing ``cmd`` with ``error`` (None: it has no request to answer)."""
    kind = cmd.type
    if kind == _T.ACK and cmd.ack.HasField("request_id"):  # an ack receipt: the refusal
        q = cmd.ack
        return commands.ack_response(q.consumer_id, q.request_id, server_error=error, message=message)
    if kind == _T.LOOKUP:
        return commands.lookup_failed(cmd.lookupTopic.request_id, error, message)
    if kind == _T.PARTITIONED_METADATA:
        return commands.partitioned_metadata_failed(cmd.partitionMetadata.request_id, error, message)
    found = request_id(cmd)
    return None if found is None else commands.error(found, error, message)


def failure(e: Exception) -> tuple[int, str]:
    """The server error and message answering a command that raised ``e`` (UnknownError for ours).

    A ``ProtocolError`` without a server error is a framing error: it is raised again, and the
    connection closes.
    """
    if isinstance(e, ProtocolError):
        if e.server_error is None:
            raise e
        return e.server_error, str(e)
    if isinstance(e, CursorkitError):
        return api.UnknownError, f"{type(e).__name__}: {e}"
    return api.UnknownError, f"internal error: {type(e).__name__}"


def request_id(cmd: api.BaseCommand) -> int | None:
    """The request id of whichever command ``cmd`` carries, if it has one."""
    for described, value in cmd.ListFields():
        if described.message_type is not None and "request_id" in described.message_type.fields_by_name:
            return int(value.request_id) if value.HasField("request_id") else None
    return None


def command_name(kind: int) -> str:
    """A command type's name (its number when the protocol has no such type)."""
    try:
        return str(_T.Type.Name(kind))
    except ValueError:
        return str(kind)
