"""The broker's server: connections, topics, subscriptions and the ``cursorkit broker`` command."""
