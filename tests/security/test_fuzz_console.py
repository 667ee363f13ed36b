"""Every route of the admin console against the input classes of issue #44 item 9: never a 5xx.

As olivia, the operator, for every registered ``ModelAdmin``: its list filtered by one field
of each kind with the values that fail late (a NUL, a year out of range, the date
hierarchy's last day, a regular expression the database cannot compile, Unicode and
past-64-bit digits), paged and sorted by odd numbers, searched for a NUL and odd digits,
its action run on an odd selection; its add, change, history and delete pages, and every
page it adds (records, events, context, usage, files, publish…), with odd ids and odd query
parameters; then the site's own pages, and the forms that take a URL (a connection, a tool
server, Discover, Test connection) with every malformed host. Every answer is below 500, no
trace is logged, and every console route of the URL conf was sent something.

Django's admin answers a filter it cannot use with a redirect to the list (``?e=1``); a
NUL anywhere in a query string or a console form is a 400 (``web.security``).
Bounded (about 900 requests, most answered before any query: one field of each kind per
list, not every field) and loopback only; run on PostgreSQL as well as SQLite (NUL and the
regular expression fail differently on each).
"""
from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.test import Client

from core.console_lists import ConsoleChangeList
from tests.security.fuzzing import MALFORMED_URLS, NUL, Prober, every_route, traces_logged

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = (models.CharField, models.TextField)
DATES = (models.DateTimeField, models.DateField)
NUMBERS = (models.AutoField, models.BigAutoField, models.IntegerField, models.ForeignKey)
ODD_IDS = ["²", "9" * 30, "a\x00b", "-1"]
# Pages every ModelAdmin has, and the site's own: Django answers an odd id there itself.
DJANGOS_OWN_PAGES = ("/change/", "/history/", "/delete/", "/add/", "<path:object_id>/", "/password/",
                     "admin/login/", "admin/logout/", "password_change/", "password_change/done/", "admin/",
                     "jsi18n/", "autocomplete/")
# Query parameters the console's own pages read (records, events, context, usage…).
PAGE_PARAMETERS = ["after", "limit", "instance", "before", "calls", "page"]


@pytest.fixture
def world(alice, space, agent, version, make_session, outbound, olivia):
    from runloop.loop import run_execute
    from sessions.services.files import file_store
    from sessions.services.questions import question_ask
    from toolservers.models import ToolServer

    ToolServer.objects.create(space=space, name="fuzzed", url="http://127.0.0.1:9/mcp")
    session = make_session(alice)
    run_execute(run_id=question_ask(session=session, content="What is 2+2?").pk)
    return {"file": file_store(session=session, user=alice, name="notes.txt", data=b"a note\n")}


def _first_field(model: type[models.Model], kinds: tuple[type, ...]) -> models.Field | None:
    return next((f for f in model._meta.concrete_fields if isinstance(f, kinds)), None)


def _list_queries(model: type[models.Model], model_admin: admin.ModelAdmin) -> list[dict[str, str]]:
    """One field of each kind, each with the values that used to fail past Django's checks."""
    # Paging, sorting and "show all" are read independently of each other: sent together.
    queries: list[dict[str, str]] = [{"q": NUL}, {"q": "²"}, {"q": "9" * 30}, {"p": "²", "o": "-99.x", "all": "²"},
                                     {"p": "9" * 30, "o": "²", "e": NUL}]
    if (text := _first_field(model, TEXT)) is not None:
        queries += [{text.name: NUL}, {f"{text.name}__contains": NUL}, {f"{text.name}__regex": "("}]
    if (date := _first_field(model, DATES)) is not None:
        queries += [{f"{date.name}__year": "-1"}, {f"{date.name}__year": "99999"},
                    {f"{date.name}__year__gt": "99999"}, {f"{date.name}__gte": "9999-99-99"}]
    if (number := _first_field(model, NUMBERS)) is not None:
        queries += [{number.name: odd} for odd in ["²", "٣", "-1", "1e3", "9" * 30]] + [{f"{number.name}__in": "1,²"}]
    if (flag := _first_field(model, (models.BooleanField,))) is not None:
        queries.append({flag.name: "maybe"})
    if model_admin.date_hierarchy:
        hierarchy = model_admin.date_hierarchy
        queries += [{f"{hierarchy}__year": "9999"}, {f"{hierarchy}__year": "9999", f"{hierarchy}__month": "12"},
                    {f"{hierarchy}__year": "9999", f"{hierarchy}__month": "12", f"{hierarchy}__day": "31"},
                    {f"{hierarchy}__year": "2026", f"{hierarchy}__month": "13"}, {f"{hierarchy}__year": "-1"}]
    return queries


def _model_of(route: str) -> type[models.Model] | None:
    found = re.match(r"admin/(\w+)/(\w+)/", route)
    try:
        return apps.get_model(found.group(1), found.group(2)) if found else None
    except LookupError:
        return None


def _filled(route: str, *, object_id: str, file_id: str, content_type_id: str) -> str:
    return "/" + (route.replace("<path:object_id>", object_id).replace("<str:file_id>", file_id)
                  .replace("<path:content_type_id>", content_type_id).replace("<id>", object_id))


def test_no_console_route_answers_5xx_to_any_input_class(world, olivia, space, caplog):
    caplog.set_level(logging.DEBUG)
    client = Client(raise_request_exception=False)
    client.force_login(olivia)
    console = Prober(client)
    routes = {route for route in every_route() if route.startswith("admin/")}

    for model, model_admin in admin.site._registry.items():
        assert issubclass(model_admin.get_changelist(None), ConsoleChangeList), f"{model.__name__}: not a console list"
        changelist = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for query in _list_queries(model, model_admin):
            console.send("GET", changelist, query=query)
        action = next(iter(model_admin.get_actions(_request(olivia))), "delete_selected")
        for odd in ["²", "9" * 30, NUL]:
            console.send("POST", changelist, {"action": action, "index": "0", "_selected_action": odd})

    for route in sorted(routes):
        model = _model_of(route)
        row = model.objects.order_by("pk").first() if model is not None else None
        real = {"object_id": str(row.pk) if row is not None else "1", "file_id": str(world["file"].pk),
                "content_type_id": str(ContentType.objects.get_for_model(model or LogEntry).pk)}
        if "(?P<" in route:  # the app index and the catch-all
            console.send("GET", "/admin/auth/", query={"q": NUL})
            console.send("GET", "/admin/²/")
            continue
        if route.endswith(DJANGOS_OWN_PAGES):  # Django's pages: an odd id is enough (real ones render slowly)
            for odd in ODD_IDS[:2] if "<" in route else []:
                console.send("GET", _filled(route, object_id=odd, file_id=odd, content_type_id=odd))
            if route.endswith(("/change/", "/add/")) or "<" not in route:
                console.send("GET", _filled(route, **real))
            continue
        console.send("GET", _filled(route, **real))
        for value in ["²", "9" * 30, "-1", NUL]:
            console.send("GET", _filled(route, **real), query=dict.fromkeys(PAGE_PARAMETERS, value))
        if "<" in route:
            for odd in ODD_IDS:
                console.send("GET", _filled(route, object_id=odd, file_id=odd, content_type_id=odd))

    connections = "/admin/models_catalog/modelconnection/"
    servers = "/admin/toolservers/toolserver/add/"
    for url in MALFORMED_URLS:
        discover = {"provider": "openai_compatible", "base_url": url, "api_key": "sk-fuzz"}
        console.send("POST", f"{connections}discover/", discover, HTTP_X_REQUESTED_WITH="XMLHttpRequest")
        console.send("POST", f"{connections}test-connection/", {**discover, "model": "m"})
        console.send("POST", f"{connections}add/", {**discover, "space": space.pk, "name": "Fuzzed", "model": "m"})
        console.send("POST", servers, {"space": space.pk, "name": "fuzzed_new", "url": url, "timeout_seconds": "60"})
    console.send("POST", servers, {"name": "no_space", "url": "http://127.0.0.1:9/mcp", "timeout_seconds": "60"})
    console.send("POST", "/admin/agents/agent/add/", {"name": NUL, "space": space.pk})
    console.send("POST", "/admin/password_change/", {"old_password": NUL, "new_password1": NUL, "new_password2": NUL})
    console.send("POST", "/admin/login/", {"username": NUL, "password": NUL})

    assert sorted(routes - console.covered) == [], "console routes nothing was sent to"
    assert console.problems == [], "\n".join(console.problems[:40])
    # Django logs what it answers 400 to itself (a refused ``_to_field``…) on django.security, without a trace.
    assert traces_logged(caplog, besides=("django.security",)) == []
    assert console.sent >= 800


def _request(user: Any):
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request

