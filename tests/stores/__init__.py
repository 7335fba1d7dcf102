"""Tests of the shared stores against real servers: ZooKeeper, object storage, faults and hand-overs."""
