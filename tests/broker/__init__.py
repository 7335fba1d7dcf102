"""Tests of the reference broker: Pulsar's wire protocol (frames, commands, checksums, batches)."""
