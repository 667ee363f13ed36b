"""The end-user chat at ``/`` (SPEC §10): server-rendered pages, a few web-only JSON
fragments, and plain JavaScript that streams a run's events from the API."""
