"""Catalog, discovery, HTTP guard and chat-client tests (SPEC §8, LOOP-3)."""
