"""Pulsar's binary protocol: frames in and out, commands, checksums and batch payloads (no I/O)."""
