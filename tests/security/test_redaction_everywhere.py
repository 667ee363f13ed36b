"""LOOP-8, end to end: a known secret in every form, everywhere a run writes.

Runs against the strict fake provider on loopback, with Alice's agent. The model echoes
the key in each form an audit saw (``tests.security.leaks.written_forms``) — in its text
(each form split across two stream chunks), its reasoning, its tool-call arguments, as a
JSON object key, in its plan, in a delegated task, in the sub-agent's answer and in the completion
check's reason; a tool server echoes its own bearer token back in each form; a tool raises
with the key in its exception message. Then every place is read back with decoders of its
own: the records, the events, the run row and its frames, the inspector's call logs and its
API, and the log the process writes (the console handler ``settings.LOGGING`` installs,
and pytest's capture behind it).
"""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import pytest
from rest_framework.test import APIClient

from runloop.loop import run_execute
from sessions.models import Instance, ModelCall, Run, RunEvent, SessionMessage
from sessions.selectors.model_calls import model_call_body
from sessions.services.questions import question_ask
from tests.conftest import REPO
from tests.fakes.fake_provider import chat_stream, sequence
from tests.fakes.mcp_servers import TOKEN
from tests.runloop.conftest import FAKE_KEY, fake, fake_agent_factory, fake_session, strict  # noqa: F401
from tests.security.leaks import leaks, process_log, written_forms
from tests.toolservers.conftest import as_alice, mcp_server, registered, server_agent  # noqa: F401
from tests.toolservers.runs import call, chat_requests

pytestmark = pytest.mark.django_db(transaction=True)

FORMS = written_forms(FAKE_KEY)
EVERY_FORM = " ".join(f"({name}) {form}" for name, form in FORMS.items())


def _split(text: str) -> list[str]:
    """Each form cut in the middle, across two chunks of the stream."""
    chunks = []
    for name, form in FORMS.items():
        half = len(form) // 2
        chunks += [f"({name}) {form[:half]}", f"{form[half:]}. "]
    return chunks


def _streams(run) -> dict[str, str]:
    """What a screen shows of each stream: its deltas joined, so a secret split across two
    events is read whole."""
    streams: dict[str, str] = {}
    for event in RunEvent.objects.filter(run=run, type__in=("message_delta", "thinking_delta")).order_by("seq"):
        key = f"{event.type} of {event.payload['instance']}"
        streams[key] = streams.get(key, "") + event.payload["text"]
    return streams


def _places(session, run, caplog, log: io.StringIO) -> dict:
    client = APIClient()
    client.force_authenticate(session.user)
    inspector = client.get(f"/api/v1/runs/{run.pk}/context")
    assert inspector.status_code == 200
    return {
        "records": [m.message for m in SessionMessage.objects.filter(session=session)],
        "events": [e.payload for e in RunEvent.objects.filter(run=run)],
        **_streams(run),
        "run row": [run.error, run.counters],
        "frames": [i.frame for i in Instance.objects.filter(run=run)],
        "model call logs": [[model_call_body(call=c), c.usage, c.outcome] for c in ModelCall.objects.filter(run=run)],
        "inspector API": inspector.json(),
        "messages API": client.get(f"/api/v1/sessions/{session.pk}/messages").json(),
        "process log": log.getvalue(),
        "captured log": caplog.text,
    }


def _arguments_with_the_key_everywhere() -> str:
    """What a model writes: the key as JSON escapes the JSON decodes, as an object key (in
    two letter cases), and every form as a value."""
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in FAKE_KEY)
    return ('{"expression": "1+1 ' + escaped + '", "' + FAKE_KEY + '": {"' + FAKE_KEY.upper() + '": '
            + json.dumps(EVERY_FORM) + "}}")


def test_loop8_a_model_echoing_the_key_in_every_form_leaves_no_form_anywhere_the_run_writes(
        fake_session, strict, caplog):
    caplog.set_level(logging.DEBUG)
    arguments = _arguments_with_the_key_everywhere()
    assert FAKE_KEY in json.loads(arguments)["expression"].replace(" ", "")  # it decodes to the key
    task = json.dumps({"task": f"Sub-task: check the balance with {EVERY_FORM}"})
    plan = json.dumps({"steps": [{"step": f"Use {form}", "status": "pending"} for form in FORMS.values()]})

    def handler(request):
        messages = request.json["messages"]
        if messages[0]["content"].startswith("You check a candidate answer"):
            return chat_stream([f"VERIFIED\nThe answer quoted {EVERY_FORM}"])
        if any(m["role"] == "user" and "Sub-task" in str(m["content"]) for m in messages):
            return chat_stream(["The sub-agent found ", *_split(EVERY_FORM)])
        if not any(m["role"] == "tool" for m in messages):
            return chat_stream(_split(EVERY_FORM), reasoning=_split(EVERY_FORM), tool_calls=[
                {"id": "calc-1", "name": "calculator", "arguments": arguments},
                {"id": "plan-1", "name": "update_plan", "arguments": plan},
                {"id": "del-1", "name": "delegate", "arguments": task}])
        return chat_stream(["All done: ", *_split(EVERY_FORM)], delay=0.05)

    strict.handler = handler
    session = fake_session(tools=("calculator", "update_plan", "delegate"))
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    session.version.refresh_from_db()
    with process_log() as log:
        run = question_ask(session=session, content="Go.")
        run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert strict.rejections == []  # what was stored still makes valid requests

    assert leaks(_places(session, run, caplog, log), FAKE_KEY) == {}
    # It was there, and it was redacted where each path writes:
    sub_task = SessionMessage.objects.get(run=run, kind="user", entry_key="task").message["content"]
    assert sub_task.startswith("Sub-task: check the balance with (as written) [REDACTED]")
    assert "[REDACTED]" in run.counters["verification"]["reason"]
    plan_steps = RunEvent.objects.get(run=run, type="plan_updated").payload["steps"]
    assert len(plan_steps) == len(FORMS) and all("[REDACTED]" in step["step"] for step in plan_steps)
    stored = SessionMessage.objects.get(run=run, kind="assistant", entry_key="assistant-1", in_main=True).message
    calc = json.loads(stored["tool_calls"][0]["function"]["arguments"])
    assert calc["expression"] == "1+1 [REDACTED]" and list(calc) == ["expression", "[REDACTED]"]
    streamed = _streams(run)
    assert streamed["message_delta of main"].count("[REDACTED]") == 2 * len(FORMS)  # both answers, each form once
    assert streamed["thinking_delta of main"].count("[REDACTED]") == len(FORMS)


def test_loop8_a_tool_server_echoing_its_bearer_token_in_every_form_leaves_no_form(server_agent, strict, fake,
                                                                                    caplog):
    caplog.set_level(logging.DEBUG)
    echoed = " ".join(written_forms(TOKEN).values())
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__echo", {"text": f"the token is {echoed}"})]),
                              chat_stream(["Done."]))
    session = server_agent(["tests.echo"])
    with process_log() as log:
        run = question_ask(session=session, content="Go")
        run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    result = SessionMessage.objects.get(session=session, kind="tool_result").message["content"]
    assert result.startswith("the token is [REDACTED]") and result.count("[REDACTED]") == len(written_forms(TOKEN))
    places = _places(session, run, caplog, log)
    places["what the model was sent next"] = chat_requests(fake)[-1].json
    assert leaks(places, TOKEN) == {}


def test_loop8_a_tool_raising_with_the_key_in_its_message_never_writes_a_form_to_the_log(fake_session, strict,
                                                                                         caplog):
    caplog.set_level(logging.DEBUG)
    calls = [{"id": f"url-{n}", "name": "http_fetch", "arguments": json.dumps({"url": f"http://[{form}]/"})}
             for n, form in enumerate(FORMS.values())]
    strict.handler = sequence(chat_stream(tool_calls=calls), chat_stream(["Those addresses are not valid."]))
    session = fake_session(tools=("http_fetch",))
    with process_log() as log:
        run = question_ask(session=session, content="Fetch these.")
        run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    written = log.getvalue()
    # The tools raised, were logged with their tracebacks (concurrently, from pool threads),
    # and every line lost the key: in the message, in the exception's text, in the repr.
    assert written.count("tool http_fetch raised") == len(FORMS) and "httpx.InvalidURL" in written
    assert written.count("Invalid IPv6 address: '[[REDACTED]") >= len(FORMS) - 4  # the base64 forms keep an edge
    assert leaks(_places(session, run, caplog, log), FAKE_KEY) == {}


WORKER_LOGGING = """
import logging, sys
import django
django.setup()
from agentloom.celery import app
from core.log_redaction import secrets_kept_from_logs
from tests.security.leaks import written_forms

app.log.setup(loglevel="INFO", redirect_stdouts=True)  # as a worker starts: its handlers replace ours
key = sys.argv[1]
with secrets_kept_from_logs([key]):
    for name, form in written_forms(key).items():
        try:
            raise ValueError(f"Invalid IPv6 address: '[{form}]'")
        except ValueError:
            logging.getLogger("tools").exception("tool %s raised with %r", name, form)
    print("printed by a tool:", key)  # a worker sends a tool's prints to its log too
logging.getLogger("tools").error("after the run: %s", "nothing to hide")
"""


def test_loop8_a_worker_that_replaces_the_log_handlers_still_keeps_every_form_out_of_its_log():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test"}
    done = subprocess.run([sys.executable, "-c", WORKER_LOGGING, FAKE_KEY], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    log = done.stdout + done.stderr
    assert log.count("Traceback") == len(FORMS) and "after the run: nothing to hide" in log
    assert log.count("[REDACTED]") >= 2 * len(FORMS)
    assert leaks({"worker log": log}, FAKE_KEY) == {}
