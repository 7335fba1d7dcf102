"""``FrameScanner``: a connection's byte stream split into frames in Rust, the hot commands decoded.

``feed(data)`` returns the frames ``data`` completes, in stream order: SEND, ACK and FLOW already
decoded into plain tuples (no protobuf object per message), every other frame as its bytes for
:func:`~cursorkit.broker.protocol.frames.decode_frame`. A size that cannot be raises
``ProtocolError`` (the connection closes); ``buffered`` counts the bytes of an unfinished frame, so
a broker can bound what its connections hold.
"""

from __future__ import annotations

from cursorkit.wire import FrameScanner

__all__ = ["FrameScanner"]
