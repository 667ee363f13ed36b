"""The usage page's place in the console (SPEC §10): who reaches it, where it is linked
from, the model prices it reads, and console labels free of requirement ids."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from models_catalog.models import ModelPrice
from sessions.admin.usage_chart import UsageBar, usage_chart
from sessions.models import AccessAudit
from tests.admin_console.conftest import compaction, model_call

pytestmark = pytest.mark.django_db
REQUIREMENT_ID = re.compile(r"\b(?:CTX|RUN|LOOP|CAT|SEC|API)-\d+\b")


def usage(version_id: int, csv: bool = False) -> str:
    return f"/admin/agents/agentversion/{version_id}/usage/{'csv/' if csv else ''}"


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def grant(user, *perms: tuple[str, str]) -> None:
    user.user_permissions.add(*(Permission.objects.get(content_type__app_label=app, codename=codename)
                                for app, codename in perms))


def test_only_staff_who_may_view_versions_runs_and_calls_reach_the_usage_page(story, alice, django_user_model):
    version = story.session.version_id
    for url in (usage(version), usage(version, csv=True)):
        assert Client().get(url).status_code == 302
        assert logged_in(alice).get(url)["Location"].startswith("/admin/login/")
    clerk = django_user_model.objects.create_user(username="clerk", password="clerk-password-1", is_staff=True)
    grant(clerk, ("agents", "view_agentversion"))
    assert logged_in(clerk).get(usage(version)).status_code == 403
    grant(clerk, ("agent_sessions", "view_modelcall"))
    assert logged_in(clerk).get(usage(version)).status_code == 403
    grant(clerk, ("agent_sessions", "view_run"))
    clerk = django_user_model.objects.get(pk=clerk.pk)  # permissions are cached per user object
    assert logged_in(clerk).get(usage(version)).status_code == 200
    assert logged_in(clerk).get(usage(version, csv=True)).status_code == 200
    assert logged_in(clerk).get(usage(987654)).status_code == 404
    assert not AccessAudit.objects.exists()


def test_the_version_and_its_agent_link_to_the_usage_page(console, story):
    version = story.session.version
    link = f'<a href="{usage(version.pk)}">Usage and cost</a>'
    assert link in console.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert link in console.get("/admin/agents/agentversion/").content.decode()
    agent_page = console.get(f"/admin/agents/agent/{version.agent_id}/change/").content.decode()
    assert link in agent_page and f">v{version.version}</a>" in agent_page


def test_a_price_is_entered_in_the_console_per_million_tokens_and_never_negative(console):
    form = {"provider": "openai", "model": "gpt-4o-mini", "input_per_million": "0.15",
            "cached_input_per_million": "0.075", "cache_write_per_million": "", "output_per_million": "0.60",
            "currency": "USD"}
    refused = console.post("/admin/models_catalog/modelprice/add/", {**form, "output_per_million": "-1"})
    assert refused.status_code == 200 and "output_per_million" in refused.context["adminform"].form.errors
    assert console.post("/admin/models_catalog/modelprice/add/", form).status_code == 302
    price = ModelPrice.objects.get()
    assert (str(price.input_per_million), price.cache_write_per_million) == ("0.150000", None)
    assert console.post("/admin/models_catalog/modelprice/add/", form).status_code == 200  # one price per model


def test_the_usage_chart_escapes_every_label_and_stacks_the_four_figures():
    svg = usage_chart([UsageBar(label="<b>01 Dec</b>", runs=2, completed=1, input_uncached=10, cache_read=30,
                                cache_written=0, output=5)])
    assert "<b>" not in svg and "&lt;b&gt;01 Dec&lt;/b&gt;" in svg
    bar = svg[svg.index('<g class="bar">'):]
    bar = bar[:bar.index("</g>")]
    # Bottom up, the empty layer left out; the tooltip has every figure.
    assert re.findall(r'<rect class="layer layer-(\w+)"', bar) == ["input_uncached", "cache_read", "output"]
    assert "2 runs, 1 completed · uncached input 10 · cache read 30 · cache written 0 · output 5" in bar
    assert usage_chart([]) == ""


def test_console_labels_carry_no_requirement_ids(console, story):
    model_call(story.first)
    compaction(story.first, covered_seq=3)
    version = story.session.version
    pages = ["/admin/agents/agent/add/", f"/admin/agents/agent/{version.agent_id}/change/",
             f"/admin/agents/agentversion/{version.pk}/change/", "/admin/models_catalog/modelconnection/add/",
             "/admin/agent_sessions/session/", "/admin/agent_sessions/run/", "/admin/agent_sessions/modelcall/",
             f"/admin/agent_sessions/session/{story.session.pk}/compactions/",
             f"/admin/agent_sessions/run/{story.first.pk}/context/", usage(version.pk),
             "/admin/models_catalog/modelprice/add/"]
    for url in pages:
        response = console.get(url)
        assert response.status_code == 200, url
        assert REQUIREMENT_ID.findall(response.content.decode()) == [], url
