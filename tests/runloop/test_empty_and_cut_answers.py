"""LOOP-3 (a clear word, never silence): an answer with nothing in it, and one its output
limit cut, on both wires.

An empty answer is recorded as one (call outcome ``empty``, the run ends saying so) and
asking again sends the same question once more; a cut answer says at how many tokens, and
Continue (``POST /api/v1/runs/{id}/continue``) is a new run whose model reads the cut answer
as its last assistant message, is asked to go on, and writes the rest."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from context.adapters import CONTINUE_NOTE
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, sequence
from web.errors import error_explain, retry_status
from web.presenters import run_views
from web.transcript import CONTINUED_NOTICE, Answer, Notice, items_from_records

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def executed(run_id: int) -> Run:
    run_execute(run_id=run_id)
    return Run.objects.get(pk=run_id)


def outcomes(run: Run) -> list[str]:
    return list(ModelCall.objects.filter(run=run, purpose="action").order_by("id").values_list("outcome", flat=True))


def records(run: Run):
    return SessionMessage.objects.filter(run=run, in_main=True).order_by("seq")


def test_an_empty_answer_is_asked_once_more_and_a_second_one_is_recorded_and_asking_again_sends_the_same_question(
        fake_session, fake, strict, alice):
    # LOOP-10: the first empty answer is asked once more at once; the second ends the run.
    strict.handler = sequence(chat_stream([]), chat_stream([]), chat_stream(["Here it is."]))
    session = fake_session()
    run = ask(session, "What is the capital of France?")

    assert run.status == Run.Status.FAILED
    assert run.error == {"code": "empty_answer", "retryable": True,
                         "message": "The model returned an empty answer twice (it was asked once more): "
                                    "no text and no tool call."}
    assert outcomes(run) == ["empty", "empty"]
    retried = [e.payload for e in RunEvent.objects.filter(run=run, type="run_error").order_by("seq")]
    assert retried[0] == {"code": "empty_answer", "retryable": True, "retrying_in": 0, "attempt": 1, "reset": True,
                          "instance": "main",
                          "message": "The model returned an empty answer; asking it once more."}
    assert retry_status(retried[0]) == "The model returned an empty answer — asking once more… Nothing is lost."
    assert not records(run).filter(kind="assistant").exists()  # nothing to read back as an answer
    finished = RunEvent.objects.get(run=run, type="run_finished").payload
    assert finished["status"] == "failed" and finished["error"]["code"] == "empty_answer"
    assert error_explain(run.error)["title"] == "The model returned an empty answer"

    asked = api(alice).post(f"/api/v1/runs/{run.pk}/resume")  # the chat's "Ask again"
    assert asked.status_code == 202
    again = executed(run.pk)
    assert again.status == Run.Status.COMPLETED, again.error
    assert outcomes(again) == ["empty", "empty", "ok"]
    first, second, third = (request.json["messages"] for request in fake.requests)
    assert second == first == third and third[-1] == {"role": "user", "content": "What is the capital of France?"}
    assert [item.html for item in items_from_records(records(again)) if isinstance(item, Answer)] == [
        "<p>Here it is.</p>"]
    assert strict.rejections == []


def test_one_empty_answer_asked_once_more_completes_the_run(fake_session, fake, strict):
    strict.handler = sequence(chat_stream([]), chat_stream(["Paris."]))
    run = ask(fake_session(), "What is the capital of France?")
    assert run.status == Run.Status.COMPLETED, run.error
    assert outcomes(run) == ["empty", "ok"] and len(fake.requests) == 2
    assert [item.html for item in items_from_records(records(run)) if isinstance(item, Answer)] == ["<p>Paris.</p>"]
    assert strict.rejections == []


def test_an_answer_cut_at_its_output_limit_says_where_and_continue_writes_the_rest(
        fake_session, fake, strict, alice, bob):
    # The provider counts the whole limit written (CAT-12: a short answer ended by length with
    # no count would be the server's context filling, said differently).
    strict.handler = sequence(chat_stream(["The first half of a long answer, "], finish_reason="length",
                                          usage={"prompt_tokens": 60, "completion_tokens": 1_024}),
                              chat_stream(["and the second half."]))
    session = fake_session()
    cut = ask(session, "Tell me everything.")

    assert cut.status == Run.Status.COMPLETED, cut.error
    assert outcomes(cut) == ["output_limit"]
    answer = records(cut).get(kind="assistant").message
    assert answer["finish_reason"] == "length" and answer["output_limit"] == 1_024
    [shown] = [item for item in items_from_records(records(cut)) if isinstance(item, Answer)]
    assert shown.limit_note == "The answer was cut at 1,024 tokens (this agent's output limit)."
    assert run_views(runs=[cut], latest_run_id=cut.pk)[0].continuable  # the chat offers Continue

    assert api(bob).post(f"/api/v1/runs/{cut.pk}/continue").status_code == 404  # not his session
    response = api(alice).post(f"/api/v1/runs/{cut.pk}/continue")
    assert response.status_code == 202 and response.json()["status"] == "queued"
    continued = executed(response.json()["id"])
    assert continued.status == Run.Status.COMPLETED, continued.error
    assert continued.session_id == session.pk and continued.pk != cut.pk

    sent = fake.requests[-1].json["messages"]
    assert sent[-2:] == [{"role": "assistant", "content": "The first half of a long answer, "},
                         {"role": "user", "content": CONTINUE_NOTE}]
    assert [r.kind for r in records(continued)] == ["assistant", "run_status"]  # no question of its own
    [view] = run_views(runs=[cut, continued], latest_run_id=continued.pk)[1:]
    items = view.items
    assert isinstance(items[0], Notice) and items[0].text == CONTINUED_NOTICE
    assert not view.continuable and not run_views(runs=[cut], latest_run_id=continued.pk)[0].continuable
    assert [item.html for item in items if isinstance(item, Answer)] == ["<p>and the second half.</p>"]
    assert strict.rejections == []

    again = api(alice).post(f"/api/v1/runs/{cut.pk}/continue")  # no longer the latest run
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_continuable"
    whole = api(alice).post(f"/api/v1/runs/{continued.pk}/continue")  # not cut
    assert whole.status_code == 409 and whole.json()["error"]["code"] == "not_continuable"
    assert Run.objects.filter(session=session).count() == 2  # nothing changed


def test_continue_is_refused_while_another_run_of_the_session_works(fake_session, strict, alice):
    strict.handler = sequence(chat_stream(["Cut here"], finish_reason="length"))
    session = fake_session()
    cut = ask(session, "Go on and on.")
    question_ask(session=session, content="Meanwhile, another question.")  # queued, not yet run
    response = api(alice).post(f"/api/v1/runs/{cut.pk}/continue")
    assert response.status_code == 409
    assert Run.objects.filter(session=session).count() == 2
