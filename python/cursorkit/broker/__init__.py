"""The reference broker: a single-node broker on Pulsar's wire protocol, built on cursorkit."""
