"""The tests of cursorkit: one package per domain of the code, and support/ for what they share."""
