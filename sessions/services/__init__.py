"""Writes for sessions, runs and records (services); reads live in ``sessions.selectors``."""
