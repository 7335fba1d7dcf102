"""Protobuf sources (``*.proto``) and their generated modules; ``make proto`` regenerates them."""
