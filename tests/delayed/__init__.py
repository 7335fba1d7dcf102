"""Tests of delayed delivery: the delay queue, in-memory rules, bucket snapshots and the bucket tracker."""
