"""Tests of Key_Shared: sticky-key hashing, selectors, draining hashes, pending acks and the dispatcher."""
