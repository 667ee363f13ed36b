"""Rows inserted on the paths every question takes, without Django composing each INSERT.

``Model.objects.create`` and ``bulk_create`` build their INSERT anew at every call, field
by field, through the query compiler; for the rows each question writes (its run, the
run's main instance, its records, its model calls) that composition cost more CPU than
the database spent on them (issue #29). ``rows_insert`` keeps one statement per model and
row count, and does per row what ``save`` does per field: ``pre_save`` (``auto_now_add``
stamps) and ``get_db_prep_save`` (encryption, JSON). Primary keys come back with
``RETURNING`` and are set on the objects, as ``bulk_create`` sets them.

No signal is sent (none is connected to these models, and ``bulk_create`` sends none);
the objects must be new, with no primary key of their own.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import AutoField, Field, Model
from django_cryptography.fields import EncryptedMixin

_COLUMNS: dict[type[Model], tuple[Field, ...]] = {}
_STATEMENTS: dict[tuple[type[Model], int, str], str] = {}


def concrete_field(model: type[Model], name: str) -> Field[Any, Any]:
    """The field ``name`` of ``model`` that is a column of its table, as the written-out
    statements prepare values (``get_db_prep_save``) and name columns with; TypeError for a
    reverse relation or a generic key, which have no column."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return field


def _columns(model: type[Model]) -> tuple[Field, ...]:
    if model not in _COLUMNS:
        _COLUMNS[model] = tuple(field for field in model._meta.concrete_fields if not isinstance(field, AutoField))
    return _COLUMNS[model]


# Statements kept for batches up to this many rows (a step's records, a question's rows);
# a larger batch (an import) is composed for itself: kept, their text would grow with it.
KEEP_ROWS = 32


def _statement(model: type[Model], rows: int, skip_conflict: str = "") -> str:
    key = (model, rows, skip_conflict)
    statement = _STATEMENTS.get(key)
    if statement is None:
        fields = _columns(model)
        columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        quote = connection.ops.quote_name
        table, key_column = quote(model._meta.db_table), quote(model._meta.pk.column)
        skip = f" ON CONFLICT {skip_conflict} DO NOTHING" if skip_conflict else ""
        statement = f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * rows)}{skip} RETURNING {key_column}"
        if rows <= KEEP_ROWS:
            _STATEMENTS[key] = statement
    return statement


def rows_insert(objs: Sequence[Model]) -> None:
    """Insert new ``objs`` of one model (in as few statements as the database's bound on
    parameters allows) and set their primary keys."""
    if not objs:
        return
    model = type(objs[0])
    fields = _columns(model)
    size = max(1, connection.ops.bulk_batch_size(list(fields), objs))
    for start in range(0, len(objs), size):
        batch = objs[start:start + size]
        params: list[Any] = []
        for obj in batch:
            params += [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]
        with connection.cursor() as cursor:
            cursor.execute(_statement(model, len(batch)), params)
            keys = [row[0] for row in cursor.fetchall()]
        for obj, key in zip(batch, keys, strict=True):
            _saved(obj, key)


def row_insert_unless_conflict(obj: Model, *, target: str) -> bool:
    """Insert one new ``obj`` unless the unique index ``target`` names (its columns, and
    its WHERE for a partial one) already holds its like: nothing is written then, and the
    transaction goes on (no savepoint to roll back to); any other violation still raises.
    Whether it was inserted; its primary key is set if so."""
    fields = _columns(type(obj))
    params = [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(_statement(type(obj), 1, skip_conflict=target), params)
        row = cursor.fetchone()
    if row is None:
        return False
    _saved(obj, row[0])
    return True


def _saved(obj: Model, key: Any) -> None:
    """What ``save`` leaves on an inserted object: its key, and its state no longer new."""
    obj.pk = key
    obj._state.adding = False
    obj._state.db = connection.alias


def columns_of(model: type[Model], alias: str) -> str:
    """The select list of every concrete column of ``model`` under ``alias``, in the order
    ``models_from_row`` reads them."""
    quote = connection.ops.quote_name
    return ", ".join(f"{quote(alias)}.{quote(field.column)}" for field in model._meta.concrete_fields)


_SELECTS: dict[tuple[tuple[type[Model], str], ...], str] = {}


def select_list(layout: Sequence[tuple[type[Model], str]]) -> str:
    """``columns_of`` each ``(model, alias)`` of ``layout``, joined, in the order
    ``models_from_row`` reads them; made once per layout (every request reads some)."""
    key = tuple(layout)
    if key not in _SELECTS:
        _SELECTS[key] = ", ".join(columns_of(model, alias) for model, alias in key)
    return _SELECTS[key]


_CONVERTERS: dict[tuple[type[Model], str], list[tuple[Any, list[Any]]]] = {}


def _converters(model: type[Model], alias: str) -> list[tuple[Any, list[Any]]]:
    """Per column, its expression and what turns the database's value into the field's:
    the backend's converters, then the field's own ``from_db_value`` (decryption, JSON),
    as Django's compiler applies them."""
    key = (model, alias)
    if key not in _CONVERTERS:
        columns = []
        for field in model._meta.concrete_fields:
            column = field.get_col(alias)
            columns.append((column, connection.ops.get_db_converters(column) + column.get_db_converters(connection)))
        _CONVERTERS[key] = columns
    return _CONVERTERS[key]


def models_from_row(row: Sequence[Any], layout: Sequence[tuple[type[Model], str]], *,
                    recent: Any = None) -> list[Any]:
    """One instance of each ``(model, alias)`` of ``layout`` from a row selected with
    ``columns_of`` of each, in order: what a ``select_related`` read would give, without
    composing its query at every call. None for a model an outer join found no row of.
    ``recent``: a ``RecentPlaintexts`` the encrypted columns are decrypted through (values
    read again and again)."""
    found: list[Any] = []
    offset = 0
    for model, alias in layout:
        columns = _converters(model, alias)
        values = list(row[offset:offset + len(columns)])
        offset += len(columns)
        if values[[field.primary_key for field in model._meta.concrete_fields].index(True)] is None:
            found.append(None)
            continue
        for index, (column, converters) in enumerate(columns):
            if recent is not None and isinstance(column.target, EncryptedMixin):
                values[index] = None if values[index] is None else recent.load(column.target, values[index])
                continue
            for converter in converters:
                values[index] = converter(values[index], column, connection)
        found.append(model.from_db(connection.alias, [field.attname for field in model._meta.concrete_fields], values))
    return found
