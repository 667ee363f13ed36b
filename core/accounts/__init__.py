"""API tokens (SPEC §9, §11): hashed, one per client, expiring, revocable."""
