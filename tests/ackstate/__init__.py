"""Tests of the ack state: Position, RangeSet, Cursor, its byte forms, policy and file store."""
