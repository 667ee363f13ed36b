"""PostgreSQL for the platform: Django's backend, with statements kept under the
protocol's bound on parameters.

With server-side binding (``agentloom/settings.py``: parameters travel apart from the
SQL, issue #29) one statement carries at most 65,535 parameters — the protocol counts them
in 16 bits — where quoting them into the SQL had no such bound. Django batches what it
writes and deletes by ``bulk_batch_size`` (a cascade deleting a space's runs, a bulk
update), which on PostgreSQL is everything at once; here it is capped, so a space with a
hundred thousand runs is still deleted. The platform's own statements with long lists
are cut by the same figure (``sessions.services.model_calls.in_chunks``: the call log's
pieces, the call-log retention).
"""
from __future__ import annotations

from django.db.backends.postgresql import base, operations

MAX_PARAMETERS = 65_535


class DatabaseOperations(operations.DatabaseOperations):
    def bulk_batch_size(self, fields, objs):
        return max(1, min(len(objs), MAX_PARAMETERS // max(len(fields), 1)))


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
