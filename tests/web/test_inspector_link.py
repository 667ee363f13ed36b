"""Staff who may open the console's context inspector get a link from each run of the chat
to it (one click to what the run's model calls received); nobody else sees it — and since a
finished run's HTML is kept (web/rendered_runs.py), not even from a page a staff user saw
first."""
from __future__ import annotations

import pytest

from tests.web.conftest import finished_run
from tests.web.test_rendered_runs import page_of

pytestmark = pytest.mark.django_db

LINK_TEXT = "Inspect this run’s model requests"


@pytest.fixture
def ada(django_user_model, space):
    """An operator (staff, every console permission) who also chats in the space."""
    from core.spaces.models import Membership
    from core.spaces.services import membership_add

    user = django_user_model.objects.create_superuser(username="ada", password="ada-password-1")
    membership_add(space=space, user=user, role=Membership.Role.MEMBER)
    return user


def test_staff_see_a_link_from_each_run_to_its_inspector(ada, make_session, client_for):
    session = make_session(ada)
    first, second = finished_run(session, question="One?"), finished_run(session, question="Two?")
    html = page_of(client_for(ada), session)
    for run in (first, second):
        assert f'href="/admin/agent_sessions/run/{run.pk}/context/"' in html
    assert html.count(LINK_TEXT) == 2
    fragment = client_for(ada).get(f"/chat/runs/{second.pk}/fragment").json()["html"]
    assert f'href="/admin/agent_sessions/run/{second.pk}/context/"' in fragment
    # The link leads to the run's inspector, which the operator may open.
    assert client_for(ada).get(f"/admin/agent_sessions/run/{second.pk}/context/").status_code == 200


def test_people_who_are_not_staff_never_see_it_even_after_staff_saw_the_same_run(ada, alice, make_session,
                                                                               client_for):
    session = make_session(alice)
    run = finished_run(session)
    # The same finished run, rendered for staff first (and kept), then for its creator.
    from django.test import RequestFactory

    from web.rendered_runs import runs_rendered

    staff_request = RequestFactory().get("/")
    staff_request.user = ada
    [staff_view] = runs_rendered(runs=[run], latest_run_id=run.pk, agent_name=session.version.name,
                                 request=staff_request)
    assert LINK_TEXT in staff_view.html
    html = page_of(client_for(alice), session)
    fragment = client_for(alice).get(f"/chat/runs/{run.pk}/fragment").json()["html"]
    assert "/admin/" not in html and LINK_TEXT not in html
    assert "/admin/" not in fragment and LINK_TEXT not in fragment


def test_staff_without_the_console_permissions_see_no_link(django_user_model, space, make_session, client_for):
    from core.spaces.models import Membership
    from core.spaces.services import membership_add

    olga = django_user_model.objects.create_user(username="olga", password="olga-password-1", is_staff=True)
    membership_add(space=space, user=olga, role=Membership.Role.MEMBER)
    session = make_session(olga)
    finished_run(session)
    assert LINK_TEXT not in page_of(client_for(olga), session)
