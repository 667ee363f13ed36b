"""What every read-only page of the admin console shares: rows the system writes (runs,
records, model calls, published versions…) are shown, never added, edited or deleted here.
"""
from __future__ import annotations

from typing import Any


class ReadOnlyAdminMixin:
    """Mixed into a ``ModelAdmin`` or an inline before it: no add, change or delete, for
    anyone (superusers included). Admins whose rows are partly editable decide per row
    themselves (see ``toolservers.admin``)."""

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
