"""Tests of the reference broker: its wire protocol, message log and server, with the real Pulsar client."""
