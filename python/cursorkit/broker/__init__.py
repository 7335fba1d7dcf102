"""The reference broker: Pulsar's wire protocol on cursorkit's cursors, dispatchers and delayed trackers."""
