"""Tests of cursorkit as a product: CLI, release artefacts, docs examples, architecture, hostile input."""
