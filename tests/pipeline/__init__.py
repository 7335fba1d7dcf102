"""Tests of the Spark pipeline: generate, rebuild (one topic and many), inspect, report, its CLI."""
