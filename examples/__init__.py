"""Example handlers shipped with jobq (see examples/handlers.py)."""
