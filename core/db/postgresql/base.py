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

import select

import psycopg
from django.db.backends.postgresql import base, operations

MAX_PARAMETERS = 65_535


class DatabaseOperations(operations.DatabaseOperations):
    def bulk_batch_size(self, fields, objs):
        return max(1, min(len(objs), MAX_PARAMETERS // max(len(fields), 1)))


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def get_new_connection(self, conn_params):
        """A pooled connection the server has ended is given back (the pool drops it and
        opens another) and the next one taken, instead of failing its request or run.

        A pool keeps its standing connections however long they idle
        (``core/db_pool.py``), so after the server restarts, fails over or ends idle
        sessions each of them would be handed out dead once. The server says so on the
        socket as it ends a session (a FATAL message, or the socket's end): an idle
        connection whose socket has something to read is asked a round trip before use. A
        live one costs a zero-time ``select``, not a round trip on every borrow.
        """
        pool = self.pool
        attempts = pool.max_size + 1 if pool is not None else 1
        for _ in range(attempts - 1):
            connection = super().get_new_connection(conn_params)
            if not _ended_by_server(connection):
                return connection
            pool.putconn(connection)
        return super().get_new_connection(conn_params)


def _ended_by_server(connection) -> bool:
    """Whether an idle connection turns out dead: something to read while no statement is
    outstanding is the server's goodbye (or a notice, which the round trip consumes)."""
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):  # its socket is already gone
        return True
    if not readable:
        return False
    try:
        connection.execute("")  # what psycopg's own check sends; the pool connections are in autocommit
    except psycopg.Error:
        return True
    return False
