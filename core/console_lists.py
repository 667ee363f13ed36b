"""Every list of the admin console refuses a filter it cannot run, instead of failing (issue #44).

Django's admin turns a bad list filter into ``IncorrectLookupParameters`` — the list is
shown again without its filters — but only for what goes wrong while the filter is
*added* to the query. Three kinds of values pass that point and fail later, as 500s:

* the date hierarchy's bounds are computed outside Django's own ``try``:
  ``?at__year=9999`` asks for 10000-01-01 (``ValueError``), ``…&at__month=12&at__day=31``
  for the day after 9999-12-31 (``OverflowError``);
* a year lookup is turned into a range of dates only when the SQL is written:
  ``?created_at__year=-1`` on any list raises ``ValueError`` while the page counts its rows;
* the database itself judges some values only when it runs the query: a regular
  expression it cannot compile (``?name__regex=(``) is a ``DataError`` on PostgreSQL and,
  on SQLite, an error of the ``REGEXP`` function Django registers.

:class:`ConsoleChangeList` moves each of those into the same refusal, with a message
saying why, and :class:`ConsoleListMixin` gives it to a ``ModelAdmin``, with one more rule:
an action's selection holds ids of the list (``_selected_action=²`` was filtered on as
posted, and raised). Every console
admin mixes it in (``tests/security/test_fuzz_console.py`` checks each registered one).
A NUL character in a query string never gets this far: ``web.security`` refuses
it with a 400 for the whole site.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import EmptyResultSet, FullResultSet, ValidationError
from django.db import DataError, OperationalError, models, transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from core.api.fields import id_from_text

logger = logging.getLogger("agentloom.console")

# What SQLite says when a Python function it calls raises: Django's REGEXP is one, and a
# pattern Python's ``re`` cannot compile is the only way a list filter gets there.
_SQLITE_FUNCTION_FAILED = "user-defined function raised exception"


def _refused(request: Any, exc: BaseException) -> IncorrectLookupParameters:
    logger.info("console list filter refused: %s on %s", type(exc).__name__, request.path)
    messages.warning(request, "This list cannot be filtered that way (a value out of range, or one the database "
                              "cannot use), so it is shown without its filters.")
    return IncorrectLookupParameters(exc)


class ConsoleChangeList(ChangeList):
    """A ``ChangeList`` whose late failures of a filter are refused like the early ones.

    Only a list that was filtered or searched is refused: the same error on the bare list
    is a fault of ours, and stays a 500 that is logged with its trace."""

    def _filtered(self) -> bool:
        return bool(self.query or self.get_filters_params())

    def get_filters(self, request: Any) -> Any:
        try:
            return super().get_filters(request)
        except (ValueError, OverflowError) as exc:  # the date hierarchy's bounds
            if not self._filtered():
                raise
            raise _refused(request, exc) from exc

    def get_queryset(self, request: Any, exclude_parameters: Any = None) -> Any:
        queryset = super().get_queryset(request, exclude_parameters)
        try:
            # Written now, not while the page renders: a year out of range raises here.
            queryset.query.get_compiler(queryset.db).as_sql()
        except (EmptyResultSet, FullResultSet):
            pass  # a filter that matches nothing (or everything) is a fine filter
        except (ValueError, OverflowError) as exc:
            if not self._filtered():
                raise
            raise _refused(request, exc) from exc
        return queryset

    def get_results(self, request: Any) -> None:
        try:
            # A savepoint: a value the database refuses must not leave a surrounding
            # transaction unusable (the counts are the first queries that run the filter).
            with transaction.atomic(using=self.queryset.db):
                super().get_results(request)
        except (DataError, OperationalError) as exc:
            # SQLite reports an error of the Python function it called (Django's REGEXP) as
            # an OperationalError; any other (the database gone, the pool busy) is not the
            # filter's fault.
            is_the_filters = isinstance(exc, DataError) or _SQLITE_FUNCTION_FAILED in str(exc)
            if not (is_the_filters and self._filtered()):
                raise
            raise _refused(request, exc) from exc


def _is_a_key(model: Any, value: str) -> bool:
    """Whether ``value`` can be a primary key of ``model``: for an integer key, ASCII digits
    that fit the column (``core.api.fields.id_from_text``), else what the field reads."""
    key = model._meta.pk
    if isinstance(key, models.IntegerField):  # AutoField and BigAutoField are IntegerFields
        return id_from_text(value) is not None
    try:
        key.to_python(value)
    except ValidationError:
        return False
    return True


if TYPE_CHECKING:
    # What the mixin overrides and calls up to is ModelAdmin's, typed by django-stubs.
    _AdminBase = admin.ModelAdmin[Any]
else:
    _AdminBase = object


class ConsoleListMixin(_AdminBase):
    """Mixed into every console ``ModelAdmin`` before ``admin.ModelAdmin``."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ConsoleChangeList

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        """An action's selection is ids of the list; Django filters on them as posted, so a
        value no key can be (``²``, 30 digits) raised while the list was filtered."""
        if not all(_is_a_key(self.model, value) for value in request.POST.getlist(ACTION_CHECKBOX_NAME)):
            messages.warning(request, "The selection holds a value that is not an id of this list: nothing was done.")
            return None  # the list is shown again, as after an action that did nothing
        return super().response_action(request, queryset)
