"""No SSRF through discovery or ``http_fetch`` (SPEC §11, CAT-5, LOOP-4).

Name resolution and ``connect`` are replaced for these tests (``outbound``): only loopback
is reachable and only the names a test declares resolve, so a refused address that got
past the product's guard shows up as a recorded attempt — never as traffic.
"""
from __future__ import annotations

import json

import pytest

from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import FakeProvider, RawResponse, chat_stream, models_list, redirect, route
from tests.runloop.conftest import fake, fake_agent_factory, fake_session, strict  # noqa: F401
from tests.security.conftest import assert_error_shape
from tools import ToolContext, registry, tool_invoke

pytestmark = pytest.mark.django_db

METADATA_AND_LINK_LOCAL = [
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.170.2/v2/credentials",
    "http://[fe80::1]/v1",
    "http://[::ffff:169.254.169.254]/v1",
    "http://[fd00:ec2::254]/latest",
    "http://100.100.100.200/latest/meta-data",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://2852039166/latest/meta-data/",  # 169.254.169.254 as one decimal number
    "http://0xA9FEA9FE/latest/meta-data/",  # …and in hex
    "http://metadata.example.test/v1",  # a DNS name that resolves to the metadata address
    "http://mixed.example.test/v1",  # one public and one link-local answer: a rebinding trick
]
# IPv4 carried inside IPv6: every embedding form a resolver or a gateway may translate back.
# 169.254.169.254 is a9fe:a9fe in hex; Teredo stores its client address inverted (5601:5601).
EMBEDDED_METADATA = [
    "http://[64:ff9b::a9fe:a9fe]/v1",  # NAT64, the well-known prefix (RFC 6052)
    "http://[64:ff9b::169.254.169.254]/v1",  # …spelled with the dotted tail
    "http://[64:ff9b:1::a9fe:a9fe]/v1",  # local-use NAT64 (RFC 8215), /96 form
    "http://[64:ff9b:1:a9fe:a9:fe00::]/v1",  # …its /48 form: the address split around the u-octet
    "http://[2002:a9fe:a9fe::1]/v1",  # 6to4 (RFC 3056)
    "http://[2001:0:a9fe:a9fe::1]/v1",  # Teredo server field (RFC 4380)
    "http://[2001:0:4136:e378:8000:63bf:5601:5601]/v1",  # Teredo client field, obfuscated
    "http://[::a9fe:a9fe]/v1",  # IPv4-compatible (deprecated, still parsed)
    "http://[::ffff:0:a9fe:a9fe]/v1",  # IPv4-translated (SIIT)
    "http://[::ffff:a9fe:a9fe]/v1",  # IPv4-mapped, in hex
    "http://[fec0::1]/v1",  # site-local (deprecated, routed inside sites)
    "http://nat64.example.test/v1",  # a DNS64 answer for the metadata address
]
EMBEDDED_PRIVATE = ["http://[64:ff9b::a00:5]/", "http://[64:ff9b::127.0.0.1]/", "http://[2002:c0a8:101::1]/",
                    "http://[::ffff:7f00:1]/", "http://[::a00:5]/", "http://[2001:0:a00:5::1]/",
                    "http://[64:ff9b:1::a00:5]/"]
PRIVATE = ["http://127.0.0.1:8080/", "http://10.0.0.5/", "http://172.16.3.4/", "http://192.168.1.1/",
           "http://[::1]/", "http://[fc00::1]/", "http://100.64.0.1/", "http://0.0.0.0/",
           "http://intranet.example.test/"]


@pytest.fixture
def names(outbound):
    outbound.names.update({
        "metadata.example.test": ["169.254.169.254"],
        "mixed.example.test": ["93.184.216.34", "169.254.169.254"],
        "intranet.example.test": ["10.1.2.3"],
        "public.example.test": ["93.184.216.34"],
        "nat64.example.test": ["64:ff9b::a9fe:a9fe"],
    })
    return outbound


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
@pytest.mark.parametrize("url", METADATA_AND_LINK_LOCAL + EMBEDDED_METADATA)
def test_discovery_refuses_metadata_and_link_local_targets_even_with_private_endpoints_allowed(
        api, alice, space, names, url, settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = True
    base = url.rsplit("/", 1)[0] if url.endswith("/") else url
    response = api(alice).post("/api/models/discover", {"provider": "openai_compatible", "base_url": base,
                                                        "api_key": "sk-x"}, format="json")
    error = assert_error_shape(response, 400)
    assert error["code"] == "unsafe_url", error
    assert names.attempts == []  # nothing even tried to connect


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
@pytest.mark.parametrize("url", PRIVATE + EMBEDDED_PRIVATE)
def test_discovery_refuses_private_targets_when_the_operator_turns_them_off(api, alice, space, names, url, settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = False
    response = api(alice).post("/api/models/discover", {"provider": "openai_compatible", "base_url": url + "v1",
                                                        "api_key": "sk-x"}, format="json")
    assert assert_error_shape(response, 400)["code"] == "unsafe_url"
    assert names.attempts == []


@pytest.mark.django_db(transaction=True)
def test_a_connection_pointing_at_the_metadata_service_is_never_contacted(api, alice, space, names):
    from agents.services import agent_create, agent_publish
    from sessions.models import Session

    response = api(alice).post("/api/v1/model-connections", {
        "name": "Sneaky", "provider": "openai_compatible", "base_url": "http://169.254.169.254/v1",
        "model": "m", "api_key": "sk-x"}, format="json")
    assert response.status_code in (201, 400)
    if response.status_code == 201:  # saving is allowed; using it is not
        connection = ModelConnection.objects.get(pk=response.json()["id"])
        agent = agent_create(space=space, name="Sneaky agent", model_connection=connection, instructions="",
                             tools=[], created_by=alice)
        session = Session.objects.create(space=space, user=alice, agent=agent,
                                         version=agent_publish(agent=agent, published_by=alice))
        run = question_ask(session=session, content="Hello")
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        assert run.status == "failed" and run.error["code"] == "unsafe_url" and run.error["retryable"] is False
        discover = api(alice).post("/api/models/discover", {"provider": "openai_compatible",
                                                            "base_url": "http://169.254.169.254/v1",
                                                            "resource_id": connection.pk}, format="json")
        assert assert_error_shape(discover, 400)["code"] == "unsafe_url"
    assert names.attempts == []


def test_discovery_never_follows_a_redirect_to_the_metadata_service(api, alice, space, names, settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = True  # the first hop is a local server, which is allowed
    with FakeProvider(route({"GET /v1/models": redirect("http://169.254.169.254/latest/meta-data/")})) as server:
        response = api(alice).post("/api/models/discover", {"provider": "openai_compatible",
                                                            "base_url": server.base_url, "api_key": "sk-x"},
                                   format="json")
        assert server.requests and all("169.254" not in r.path for r in server.requests)
    assert 400 <= response.status_code < 600 and response.status_code != 500
    assert_error_shape(response)
    assert "169.254" not in response.content.decode()
    assert names.attempts == []


def _fetch(url: str, **options):
    context = ToolContext(run_id=0, session_id=0, instance_id=0, services={"fetch_options": options})
    return tool_invoke(registry["http_fetch"], json.dumps({"url": url}), context)


@pytest.mark.parametrize("url", METADATA_AND_LINK_LOCAL + EMBEDDED_METADATA + PRIVATE + EMBEDDED_PRIVATE + [
                                                                     "file:///etc/passwd", "gopher://127.0.0.1/",
                                                                     "http://user:pw@public.example.test/"])
def test_http_fetch_refuses_metadata_link_local_and_private_targets(names, url, settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = True  # never widens http_fetch
    outcome = _fetch(url)
    assert outcome.status == "error", (url, outcome.content)
    assert names.attempts == []


def test_http_fetch_reports_a_redirect_to_the_metadata_service_without_following_it(names):
    def page(request):
        return redirect("http://169.254.169.254/latest/meta-data/iam/")

    with FakeProvider(page) as server:
        outcome = _fetch("http://public.example.test/start", transport=server.forwarding_transport())
        assert len(server.requests) == 1
    assert outcome.status == "ok" and "not followed" in outcome.content
    assert names.attempts == []


def test_http_fetch_pins_the_address_it_checked_so_a_rebinding_name_cannot_switch(names):
    answers = iter([["93.184.216.34"], ["169.254.169.254"]])  # public when checked, metadata afterwards
    with FakeProvider(lambda request: RawResponse(b"public page", headers={"Content-Type": "text/plain"})) as server:
        outcome = _fetch("http://public.example.test/", transport=server.forwarding_transport(),
                         resolver=lambda host, port: next(answers))
    assert outcome.status == "ok" and outcome.content == "public page"
    assert names.attempts == []


@pytest.mark.django_db(transaction=True)
def test_a_model_asking_http_fetch_for_the_metadata_service_gets_an_error_result_and_nothing_is_sent(
        fake_session, strict, names):
    call = {"id": "f1", "name": "http_fetch", "arguments": json.dumps({"url": "http://169.254.169.254/latest/"})}
    replies = iter([chat_stream(tool_calls=[call]), chat_stream(["I cannot reach that."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=["http_fetch"])
    run = question_ask(session=session, content="Read the instance metadata")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "completed"
    result = SessionMessage.objects.get(run=run, kind="tool_result").message
    assert result["status"] == "error" and "refused" in result["content"]
    assert names.attempts == [] and strict.rejections == []


@pytest.mark.parametrize("address", ["64:ff9b::5db8:d822", "2002:5db8:d822::1", "2606:4700:4700::1111",
                                     "93.184.216.34"])
def test_a_public_address_stays_reachable_in_every_form_the_guard_unwraps(address):
    from models_catalog.address_rules import address_problem

    # 93.184.216.34 through NAT64 and 6to4, a plain public IPv6 address, and the IPv4 itself.
    assert address_problem(address, allow_private=False) is None


def test_discovery_of_a_loopback_fake_still_works_with_the_guard_in_place(api, alice, space, names):
    # The guard fixture blocks only what leaves the machine: a local model server is reachable.
    with FakeProvider(route({"GET /v1/models": models_list(["local-model"])})) as server:
        response = api(alice).post("/api/models/discover", {"provider": "openai_compatible",
                                                            "base_url": server.base_url, "api_key": "sk-x"},
                                   format="json")
    assert response.status_code == 200 and response.json()["models"][0]["id"] == "local-model"
