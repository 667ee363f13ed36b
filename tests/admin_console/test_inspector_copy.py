"""The context inspector's "copy as JSON / cURL" (SPEC §10): the body exactly as the call
sent it, and a cURL command that, run in a shell with ``API_KEY`` set, sends that body to
the provider's chat endpoint — checked by running it against a fake provider on a
loopback socket, for an OpenAI-compatible server and for Anthropic. The command never
holds the stored key."""
from __future__ import annotations

import html as html_module
import json
import os
import re
import shutil
import subprocess

import pytest
from django.test import Client

from models_catalog.request_copy import KEY_PLACEHOLDER, chat_endpoint, curl_command
from sessions.models import AccessAudit, Session
from sessions.selectors.instances import main_instance
from sessions.selectors.model_calls import model_call_body
from sessions.services.model_calls import model_call_close, model_call_open
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import JSONResponse, chat_completion
from tests.sessions.helpers import claim

pytestmark = pytest.mark.django_db

STORED_KEY = "sk-live-STORED-KEY-never-copied-0042"
SHELL_KEY = "sk-from-the-shell-7"


def _run_with_call(space, alice, *, provider: str, base_url: str, body: dict, api_key: str = STORED_KEY):
    from agents.services import agent_create, agent_publish
    from models_catalog.services import connection_create

    connection = connection_create(space=space, ask_server=False, data={
        "name": provider, "provider": provider, "base_url": base_url, "model": body["model"],
        "context_window": 32_768, "max_output_tokens": 1_024, **({"api_key": api_key} if api_key else {})})
    agent = agent_create(space=space, name=f"{provider} agent", model_connection=connection,
                         instructions="Be brief.", tools=[], created_by=alice)
    version = agent_publish(agent=agent, published_by=alice)
    session = Session.objects.create(space=space, user=alice, agent=agent, version=version)
    run = claim(question_ask(session=session, content="Where is the 'quote' & the $HOME?"))
    call = model_call_open(run=run, instance=main_instance(run=run), purpose="action", provider=provider,
                           model=body["model"], estimator_id="tiktoken-o200k_base-v1", estimated_tokens=100,
                           body=body, estimates=[10] * len(body["messages"]))
    model_call_close(call=call, outcome="ok", usage={"prompt_tokens": 90, "completion_tokens": 3})
    return run, call


def _copies(console: Client, run, call) -> tuple[str, str]:
    page = console.get(f"/admin/agent_sessions/run/{run.pk}/context/")
    assert page.status_code == 200
    text = page.content.decode()
    found = {kind: re.search(rf'<pre class="request-copy-source" hidden id="call-{call.pk}-{kind}">(.*?)</pre>',
                             text, re.S) for kind in ("json", "curl")}
    assert STORED_KEY not in text
    return (html_module.unescape(found["json"].group(1)),
            html_module.unescape(found["curl"].group(1)) if found["curl"] else "")


OPENAI_BODY = {"model": "qwen3", "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Where is the 'quote' & the $HOME? `uname` \\ \"done\" — ✓"}],
    "stream": False, "max_tokens": 64}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_curl_sends_the_same_body_to_an_openai_compatible_server(console, space, alice, olivia, fake_provider):
    run, call = _run_with_call(space, alice, provider="openai_compatible", base_url=fake_provider.base_url,
                               body=OPENAI_BODY)
    as_json, as_curl = _copies(console, run, call)
    assert json.loads(as_json) == model_call_body(call=call) == OPENAI_BODY
    assert KEY_PLACEHOLDER in as_curl and STORED_KEY not in as_curl and "export API_KEY" in as_curl
    assert AccessAudit.objects.filter(user=olivia, what="context_inspector", run=run).exists()

    fake_provider.handler = lambda request: chat_completion("Here.")
    done = subprocess.run(["bash", "-c", as_curl], env={**os.environ, "API_KEY": SHELL_KEY}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    [sent] = fake_provider.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {SHELL_KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json == OPENAI_BODY  # byte for byte what the call sent, quotes, $ and backticks included
    assert "Here." in done.stdout


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_curl_speaks_anthropics_endpoint_and_headers(console, space, alice, fake_provider):
    body = {"model": "claude-sonnet-4", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    run, call = _run_with_call(space, alice, provider="anthropic", base_url=fake_provider.url, body=body)
    as_json, as_curl = _copies(console, run, call)
    assert json.loads(as_json) == body
    fake_provider.handler = lambda request: JSONResponse({"type": "message", "content": []})
    done = subprocess.run(["bash", "-c", as_curl], env={**os.environ, "API_KEY": SHELL_KEY}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    [sent] = fake_provider.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")  # the SDK's base, completed with /v1
    assert sent.headers["x-api-key"] == SHELL_KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers and "anthropic-beta" not in sent.headers  # no memory tool, no beta
    assert sent.json == body


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_mem2_the_curl_of_a_call_with_the_memory_tool_carries_its_beta(console, space, alice, fake_provider):
    body = {"model": "claude-sonnet-4", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
            "tools": [{"type": "memory_20250818", "name": "memory"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    run, call = _run_with_call(space, alice, provider="anthropic", base_url=fake_provider.url, body=body)
    _, as_curl = _copies(console, run, call)
    assert '-H "anthropic-beta: context-management-2025-06-27"' in as_curl
    fake_provider.handler = lambda request: JSONResponse({"type": "message", "content": []})
    done = subprocess.run(["bash", "-c", as_curl], env={**os.environ, "API_KEY": SHELL_KEY}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    [sent] = fake_provider.requests
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"
    assert sent.json == body


def test_a_server_without_a_key_gets_no_key_header_and_the_demo_no_curl(console, space, alice, fake_provider, story):
    run, call = _run_with_call(space, alice, provider="openai_compatible", base_url=fake_provider.base_url,
                               body=OPENAI_BODY, api_key="")
    _, as_curl = _copies(console, run, call)
    assert "Authorization" not in as_curl and KEY_PLACEHOLDER not in as_curl.split("\n", 1)[1]
    # The story's version runs on the offline demo model: JSON only, and why.
    from tests.admin_console.conftest import model_call

    demo_call = model_call(story.first)
    demo_call.provider = "demo"
    demo_call.save(update_fields=["provider"])
    page = console.get(f"/admin/agent_sessions/run/{story.first.pk}/context/").content.decode()
    assert f'data-copy="call-{demo_call.pk}-json"' in page and f'data-copy="call-{demo_call.pk}-curl"' not in page
    assert "runs inside AgentLoom: there is no endpoint to call" in page


def test_chat_endpoint_and_the_command_for_each_kind_of_provider():
    openai = chat_endpoint(provider="openai", base_url="", with_key=True)
    assert openai.url == "https://api.openai.com/v1/chat/completions"
    assert ("Authorization", "Bearer $API_KEY") in openai.headers
    anthropic = chat_endpoint(provider="anthropic", base_url="https://gateway.example/anthropic", with_key=True)
    assert anthropic.url == "https://gateway.example/anthropic/v1/messages"
    assert ("x-api-key", "$API_KEY") in anthropic.headers
    assert chat_endpoint(provider="demo", base_url="", with_key=False) is None
    memory = {"tools": [{"type": "memory_20250818", "name": "memory"}]}
    assert ("anthropic-beta", "context-management-2025-06-27") in chat_endpoint(
        provider="anthropic", base_url="", with_key=True, body=memory).headers
    # The function of the same name on an OpenAI wire needs no header.
    function = {"tools": [{"type": "function", "function": {"name": "memory"}}]}
    assert not any(name == "anthropic-beta" for name, _ in chat_endpoint(
        provider="anthropic", base_url="", with_key=True, body=function).headers)
    assert chat_endpoint(provider="openai", base_url="", with_key=True, body=memory).headers == openai.headers
    command = curl_command(openai, {"model": "m", "messages": [{"role": "user", "content": "it's"}]})
    assert command.splitlines()[1] == "curl -sS -N -X POST https://api.openai.com/v1/chat/completions \\"
    assert command.endswith("""--data-binary '{"model": "m", "messages": [{"role": "user", "content": "it'"'"'s"}]}'""")
