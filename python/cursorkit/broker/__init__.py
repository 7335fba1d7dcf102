"""The reference broker: a broker on Pulsar's wire protocol (one node, or several sharing ZooKeeper)."""
