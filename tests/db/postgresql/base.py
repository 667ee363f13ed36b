"""PostgreSQL for the test suite: the platform's backend, with a flush that deletes rows.

A transactional test (``django_db(transaction=True)``: the run loop, live servers, worker
processes) ends with a flush. Django flushes PostgreSQL with one ``TRUNCATE`` of every
table, which costs about half a second whatever the tables hold (each table gets new
files); the tests' tables hold a few rows, and ``DELETE`` empties them in milliseconds.
Foreign keys are created ``DEFERRABLE INITIALLY DEFERRED``, so the order does not matter
inside the flush's transaction. Sequences are left alone either way (Django's default).

The rows Django's ``post_migrate`` handlers make — content types and permissions, the same
for every test — are kept by the flush, and the handlers are not run again after it
(``tests/conftest.py``): checking them for every app was ~0.1 s of each transactional
test's end, the larger part once the rows were deleted rather than truncated. No test makes
or removes either kind of row.

Nothing else differs from production's backend (``core.db.postgresql``).
"""
from __future__ import annotations

from core.db.postgresql import base

# Made by post_migrate (django.contrib.contenttypes, django.contrib.auth) after migrating.
KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


class DatabaseOperations(base.DatabaseOperations):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or reset_sequences or allow_cascade:
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return ["SET CONSTRAINTS ALL DEFERRED;",
                *(f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
                  for table in tables if table not in KEPT_BY_FLUSH)]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    flush_keeps_post_migrate_rows = True  # read by tests/conftest.py
