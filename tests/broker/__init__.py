"""Tests of the reference broker: the message log (its model, faults, crashes and hostile files)."""
