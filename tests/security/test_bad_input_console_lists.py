"""Console lists refuse a filter they cannot run instead of failing (issue #44 item 9, SPEC §10, §11).

Django's admin shows a list again without its filters (a redirect to ``?e=1``) when a filter
fails while it is added to the query; these failed later, as 500s: a year out of range
(``?created_at__year=-1``), the date hierarchy's last day, a regular expression the
database cannot compile, an action's selection that is no id. A NUL in a search box or a
filter is a 400 for the whole site (PostgreSQL refuses NUL in text: there it was a 500).
As olivia, the operator.
"""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from core.spaces.models import Space
from models_catalog.models import ModelConnection
from sessions.services.access_audit import access_audit_write
from tests.security.conftest import assert_error_shape
from tests.security.fuzzing import NUL

pytestmark = pytest.mark.django_db

SESSIONS = "/admin/agent_sessions/session/"
CONNECTIONS = "/admin/models_catalog/modelconnection/"
ACCESS = "/admin/agent_sessions/accessaudit/"


def _refused_filter(response, path: str) -> None:
    assert response.status_code == 302 and response["Location"] == f"{path}?e=1", (response.status_code,
                                                                                   response.get("Location"))
    assert any("cannot be filtered that way" in str(m) for m in get_messages(response.wsgi_request))


@pytest.mark.parametrize("path, query", [
    (SESSIONS, {"created_at__year": "-1"}),
    (SESSIONS, {"created_at__year": "99999"}),
    (CONNECTIONS, {"created_at__year__gt": "10000"}),
])
def test_a_year_out_of_range_in_a_list_filter_shows_the_list_without_its_filters(console, make_session, alice,
                                                                                  demo_connection, path, query):
    make_session(alice)
    _refused_filter(console.get(path, query), path)


@pytest.mark.parametrize("query", [
    {"at__year": "9999"},
    {"at__year": "9999", "at__month": "12"},
    {"at__year": "9999", "at__month": "12", "at__day": "31"},
])
def test_the_date_hierarchy_past_its_last_day_shows_the_list_without_its_filters(console, olivia, query):
    access_audit_write(user=olivia, what="records", session=None, detail={})
    _refused_filter(console.get(ACCESS, query), ACCESS)


def test_a_regular_expression_the_database_cannot_compile_shows_the_list_without_its_filters(console,
                                                                                            demo_connection):
    _refused_filter(console.get(CONNECTIONS, {"name__regex": "("}), CONNECTIONS)


@pytest.mark.parametrize("path, query", [
    (SESSIONS, {"q": NUL}),
    (CONNECTIONS, {"name": NUL}),
    (CONNECTIONS, {"model__contains": NUL}),
    ("/admin/auth/user/", {"q": NUL}),
])
def test_a_nul_in_a_search_box_or_a_text_filter_is_a_400(console, demo_connection, path, query):
    response = console.get(path, query)
    assert response.status_code == 400
    assert "NUL" in response.content.decode()


def test_a_nul_in_a_console_form_is_a_400_and_changes_nothing(console, space):
    response = console.post("/admin/spaces/space/add/", {"name": NUL})
    assert response.status_code == 400
    assert list(Space.objects.values_list("name", flat=True)) == ["Acme"]


@pytest.mark.parametrize("selected", ["²", "9" * 30])
def test_an_action_on_a_selection_that_is_no_id_does_nothing_and_says_so(console, demo_connection, selected):
    response = console.post(CONNECTIONS, {"action": "delete_selected", "index": "0", "_selected_action": selected})
    assert response.status_code == 302
    assert any("not an id of this list" in str(m) for m in get_messages(response.wsgi_request))
    assert ModelConnection.objects.filter(pk=demo_connection.pk).exists()


def test_a_nul_in_any_query_string_is_a_400_in_the_error_shape_on_the_api(api, alice):
    response = api(alice).get("/api/v1/agents", {"q": NUL})
    assert "NUL" in assert_error_shape(response, 400)["message"]
