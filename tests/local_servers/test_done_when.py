"""Issue #45's "Done when", on the real llama-cpp-python server (SmolLM2-135M-Instruct, n_ctx
2,048, one request at a time): what a self-hoster does, through the product's own loop.

* the newcomer's path: Discover, accept the figures offered, a long chat of 14 long answers;
* the window entered (2,048): the same 14 long answers;
* two people at once on the one-slot server;
* a Chinese conversation;
* a session the platform's default window (32,768) left stuck answers after Resume and after
  its next question;
* a summary prepared in the background (CTX-45) while an answer streams does not cut it.

Every run must complete, long conversations must compact, and nothing said may be lost (read
back through the messages API). Answers are bounded by the agent's output limit (``OUTPUT``
tokens) so the questions ask for more than fits: long answers, a bounded file. Nothing here
waits on a clock: each run is driven to its end as a worker drives it
(``tests/runloop/driving.py``), the server is real, and the assertions read outcomes (run
status, error codes, compaction records, answer text), never timings.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from sessions.models import PreparedCompaction, Run, SessionMessage
from sessions.run_errors import RunError
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.local_servers.product import RealServerChat

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.local_server]

# Tokens an answer may take: long answers, bounded on two busy cores. A machine much slower
# than that (SmolLM2 at one token a second under a load of 11) may lower it for a look.
OUTPUT = int(os.environ.get("AGENTLOOM_REAL_SERVER_OUTPUT", "192"))
WINDOW = 2048  # what the real server keeps (n_ctx): tests/local_servers/fixtures.py
LONG = 14  # the long chat
TOPICS = ("the Roman Empire", "photosynthesis", "the French Revolution", "black holes", "the printing press",
          "plate tectonics", "the Silk Road", "vaccines", "the steam engine", "coral reefs", "the Moon landing",
          "volcanoes", "the Renaissance", "honey bees", "the Internet", "glaciers")
CHINESE = ("请详细介绍中国长城的历史、建造过程和它在今天的意义，写得越详细越好。",
           "请详细解释光合作用的原理，包括光反应和暗反应，写几段话。",
           "请详细讲述丝绸之路的历史，它连接了哪些地方，交换了哪些商品和思想？",
           "请详细介绍中国古代四大发明，每一项的历史和影响都要写清楚。",
           "请详细描述黄河和长江对中国文明发展的影响，写得长一些。",
           "请详细介绍唐朝的文化、诗歌和对外交流，写几段话。")
CHINESE_INSTRUCTIONS = "你是一位耐心的老师。请用中文详细回答每个问题，写几段话。"
INSTRUCTIONS = "You are a patient teacher. Answer every question at length, in several paragraphs."


NOTES = ("My notes so far, to build on: people first wrote about it long ago, and each generation added "
         "something; the early accounts disagree about dates, places and names; later work measured what the "
         "early accounts only described; the changes it brought reached trade, farming, travel, medicine, law and "
         "everyday life; some of those changes were welcomed and some were resisted for a long time; today "
         "teachers, engineers and historians still argue about what mattered most, and why it happened where and "
         "when it did, and not somewhere else or sooner. Please use these notes, correct them where they are wrong, "
         "and add what they leave out.")


def long_question(topic: str) -> str:
    """A long question asking for a long answer: the window fills from both sides, as a
    person pasting notes and asking for an essay fills it."""
    return (f"Write a long, detailed essay about {topic}: its history, how it works, the people involved, "
            f"and why it matters today. Use several long paragraphs and give many examples. {NOTES}")


def run_to_end(run_id: int) -> Run:
    """Drive a queued run as a worker does until it ends. A run that waits for the model
    server's one slot (one request at a time) stays queued until the slot frees and the worker is woken:
    here the test is that worker, and asks again until the run has ended (a bounded loop on
    the run's own status, not a clock)."""
    import time

    from runloop.loop import run_execute

    bound = time.monotonic() + 900
    while True:
        run_execute(run_id=run_id)
        run = Run.objects.get(pk=run_id)
        if run.status not in Run.ACTIVE_STATUSES or time.monotonic() > bound:
            return run
        time.sleep(0.2)  # another person's run holds the slot: look again shortly


def ask(chat: RealServerChat, question: str) -> Run:
    """Ask in ``chat``'s session and run the question to its end."""
    return run_to_end(question_ask(session=chat.session, content=question).pk)


def outcome(run: Run) -> str:
    """How a run ended, for an assertion's message: status and the error it recorded."""
    run.refresh_from_db()
    return f"run {run.pk}: {run.status} {run.error}"


def compactions(session) -> int:
    """Compaction checkpoints of the session's instances (one snapshot each, RUN-10).

    CTX-48: a small model's summary may fail the check (a list of sea animals is no
    summary); the platform then writes it from the records. Either is a compaction, and
    each says which it is: a summary by code carries the mark, a model's passed the check."""
    from context.compaction.code_summary import CODE_SUMMARY_MARK
    from sessions.models import CompactionSnapshot

    snapshots = list(CompactionSnapshot.objects.filter(instance__run__session=session))
    summaries = [(r.run_id, r.message["summary"] or "")
                 for r in SessionMessage.objects.filter(session=session, kind="compaction_summary")]
    for snapshot in snapshots:
        source = snapshot.metrics.get("summary_source")
        if source is None:  # folded tool results only (CTX-47): no summary to check
            continue
        assert source in ("model", "code"), snapshot.metrics
        if source == "model":
            assert [] in [v["problems"] for v in snapshot.metrics["summary_check"]], snapshot.metrics
        texts = [text for run, text in summaries if run == snapshot.instance.run_id]
        assert any((CODE_SUMMARY_MARK in text) == (source == "code") for text in texts), texts
    return len(snapshots)


def answers(run: Run) -> list[dict[str, Any]]:
    return [r.message for r in SessionMessage.objects.filter(run=run, kind="assistant").order_by("seq")]


def answer_text(run: Run) -> str:
    """The run's last answer as the chat shows it (text parts joined)."""
    found = answers(run)
    if not found:
        return ""
    content = found[-1].get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def finishes(run: Run, purpose: str = "action") -> list[tuple[str, str | None]]:
    """Each logged model call of the run for ``purpose``: its outcome and the finish reason
    the server sent (None: the stream ended without one — a cut, not an answer)."""
    from sessions.models import ModelCall

    return [(call.outcome, (call.request.get("output") or {}).get("finish_reason"))
            for call in ModelCall.objects.filter(run=run, purpose=purpose).order_by("pk")]


def assert_whole(run: Run, label: str) -> None:
    """The run's answer was a whole one: the server ended it (``stop``) or the output limit
    did (``length``); an answer cut by the server's next request is never the last word."""
    text = answer_text(run)
    assert text.strip(), f"{label}: the answer came back empty ({outcome(run)})"
    ended = finishes(run)
    assert ended and ended[-1][1] in ("stop", "length"), f"{label}: the last answer was cut: {ended}"


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def records_read(user, session) -> list[dict[str, Any]]:
    """Every record of the session through the messages API, page after page (RUN-11)."""
    client, after, items = api_as(user), 0, []
    while True:
        page = client.get(f"/api/v1/sessions/{session.pk}/messages", {"after": after, "limit": 200})
        assert page.status_code == 200, page.content
        body = page.json()
        if not body["items"]:  # past the last record the page is empty and next_after stays put
            return items
        items.extend(body["items"])
        after = body["next_after"]


def assert_nothing_lost(user, chat: RealServerChat, questions: list[str]) -> None:
    """Every question asked is on record, in order, and each completed run kept its answer."""
    records = records_read(user, chat.session)
    asked = [r["message"]["content"] for r in records if r["kind"] == "user"]
    assert asked == questions
    for run in chat.runs():
        said = [r for r in records if r["kind"] == "assistant" and r["run_id"] == run.pk]
        assert said, f"no answer on record for {outcome(run)}"


def entered(server, *, space, window: int | None = WINDOW, ask_server: bool = True):
    """A connection as an admin enters it (``connection_create``: the API's and the console's
    path, which picks the margin for the window entered), with the test's output limit."""
    from models_catalog.services import connection_create

    data = {"name": "Entered by hand", "provider": "openai_compatible", "base_url": server.base_url, "api_key": "",
            "model": server.model, "max_output_tokens": OUTPUT}
    if window is not None:
        data["context_window"] = window
    return connection_create(space=space, data=data, ask_server=ask_server)


def long_chat(chat: RealServerChat, questions: list[str]) -> list[Run]:
    """Ask each question in turn; stop at the first run that does not complete (the chat
    would be stuck there), saying how it ended."""
    runs = []
    for number, question in enumerate(questions, start=1):
        run = ask(chat, question)
        runs.append(run)
        assert run.status == Run.Status.COMPLETED, f"question {number} of {len(questions)}: {outcome(run)}"
        assert_whole(run, f"question {number}")
    return runs


# --- the newcomer's path -------------------------------------------------------------------


def test_alice_discovers_the_server_accepts_its_figures_and_gets_fourteen_long_answers(real_llama_cpp_python, space,
                                                                                      alice):
    client = api_as(alice)
    found = client.post("/api/models/discover", {"provider": "openai_compatible",
                                                 "base_url": real_llama_cpp_python.base_url}, format="json")
    assert found.status_code == 200, found.content
    offered = next(m for m in found.json()["models"] if m["id"] == real_llama_cpp_python.model)
    # Accept what Discover offered (its window and its token); only the answer length is the
    # test's, to keep fourteen long answers bounded on two cores.
    saved = client.post("/api/v1/model-connections", {
        "name": "My laptop", "provider": "openai_compatible", "base_url": real_llama_cpp_python.base_url,
        "model": offered["id"], "discovery_token": offered["discovery_token"], "max_output_tokens": OUTPUT,
    }, format="json")
    assert saved.status_code == 201, saved.content
    from models_catalog.models import ModelConnection

    connection = ModelConnection.objects.get(pk=saved.json()["id"])
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice, connection=connection,
                               instructions=INSTRUCTIONS)
    questions = [long_question(topic) for topic in TOPICS[:LONG]]

    long_chat(chat, questions)

    assert compactions(chat.session) >= 1
    assert_nothing_lost(alice, chat, questions)


# --- the window entered ----------------------------------------------------------------------


def test_with_the_window_entered_fourteen_long_answers_complete_with_compactions(real_llama_cpp_python, space, alice):
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice,
                               connection=entered(real_llama_cpp_python, space=space), instructions=INSTRUCTIONS)
    questions = [long_question(topic) for topic in TOPICS[:LONG]]

    long_chat(chat, questions)

    assert compactions(chat.session) >= 1
    assert_nothing_lost(alice, chat, questions)


# --- two people at once ----------------------------------------------------------------------


def test_alice_and_bob_asking_at_once_on_the_one_slot_server_both_get_whole_answers(real_llama_cpp_python, space,
                                                                                    alice, bob):
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice,
                               connection=entered(real_llama_cpp_python, space=space), instructions=INSTRUCTIONS)
    chats = {"alice": chat, "bob": chat.for_user(bob)}
    rounds = 3
    ended: dict[str, list[Run]] = {"alice": [], "bob": []}
    failures: list[BaseException] = []
    both_asked = threading.Barrier(2)

    def converse(name: str, first: int) -> None:
        try:
            for turn in range(rounds):
                # Each round starts with both questions in flight at once: the one slot is shared.
                both_asked.wait(timeout=600)
                ended[name].append(ask(chats[name], long_question(TOPICS[first + turn])))
        except BaseException as exc:  # noqa: BLE001 — reported by the test's thread below
            failures.append(exc)
            both_asked.abort()
        finally:
            connections.close_all()  # this thread's own connection: the test database is dropped after

    threads = [threading.Thread(target=converse, args=("alice", 0)),
               threading.Thread(target=converse, args=("bob", 5))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)
        assert not thread.is_alive(), "a person's run never ended"
    assert not failures, failures

    for name, runs in ended.items():
        assert len(runs) == rounds
        for run in runs:
            assert run.status == Run.Status.COMPLETED, f"{name}: {outcome(run)}"
            assert_whole(run, name)


# --- a Chinese conversation -------------------------------------------------------------------


def test_a_chinese_conversation_completes_with_compactions(real_llama_cpp_python, space, alice):
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice,
                               connection=entered(real_llama_cpp_python, space=space),
                               instructions=CHINESE_INSTRUCTIONS)
    # Ten long answers: more than the 2,048 tokens the server keeps, so the chat compacts.
    questions = list(CHINESE) + [question.replace("请详细", "请再详细", 1) for question in CHINESE[:4]]

    long_chat(chat, questions)

    assert compactions(chat.session) >= 1
    assert_nothing_lost(alice, chat, questions)


# --- a stuck session recovers ----------------------------------------------------------------


def test_a_session_stuck_on_the_default_window_answers_after_resume_and_its_next_question(real_llama_cpp_python,
                                                                                         space, alice):
    # The newcomer's connection as the platform saved it before it asked servers (CAT-8): the
    # default window, 32,768, on a server that keeps 2,048; no refusal seen yet.
    connection = entered(real_llama_cpp_python, space=space, window=None, ask_server=False)
    assert (connection.context_window, connection.context_window_source) == (32_768, "platform_default")
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice, connection=connection,
                               instructions=INSTRUCTIONS)
    questions = [long_question(topic) for topic in TOPICS[:7]]
    for question in questions:  # more than the server keeps: the next prompt is over its window
        ask(chat, question)

    # The run the platform's earlier code then failed for good, as it stored it: read as an
    # outage ("provider down"), resumable, and every Resume failing the same way.
    stuck_question = long_question(TOPICS[7])
    stuck = question_ask(session=chat.session, content=stuck_question)
    assert run_finish(run=stuck, status=Run.Status.FAILED, expected_from=(Run.Status.QUEUED,),
                      error=RunError(code="provider_unavailable", retryable=True,
                                     message="The model provider is down or not answering."))
    questions.append(stuck_question)

    resumed = api_as(alice).post(f"/api/v1/runs/{stuck.pk}/resume")
    assert resumed.status_code == 202, resumed.content
    run_to_end(stuck.pk)
    assert outcome(stuck).startswith(f"run {stuck.pk}: completed"), f"after Resume: {outcome(stuck)}"
    assert_whole(stuck, "the resumed run")

    questions.append(long_question(TOPICS[13]))
    following = ask(chat, questions[-1])
    assert following.status == Run.Status.COMPLETED, f"the next question: {outcome(following)}"
    assert_whole(following, "the next question")
    assert compactions(chat.session) >= 1
    assert_nothing_lost(alice, chat, questions)


# --- a summary prepared during an answer --------------------------------------------------------


def test_a_summary_prepared_in_the_background_does_not_cut_the_answer_being_streamed(real_llama_cpp_python, space,
                                                                                     alice):
    from sessions.services.dispatch import preparation_dispatcher_set
    from tests.runloop.preparing import Preparations

    preparations = Preparations()
    preparation_dispatcher_set(preparations)  # each summary made at once beside the run, as a worker would
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice,
                               connection=entered(real_llama_cpp_python, space=space), instructions=INSTRUCTIONS)
    try:
        for number, topic in enumerate(TOPICS[:8], start=1):
            run = ask(chat, long_question(topic))
            assert run.status == Run.Status.COMPLETED, f"question {number}: {outcome(run)}"
            assert_whole(run, f"question {number}")
            if PreparedCompaction.objects.filter(session=chat.session).exists():
                preparations.wait()
                if number >= 6:
                    break
    finally:
        preparations.wait()

    assert PreparedCompaction.objects.filter(session=chat.session).exists(), "no summary was prepared"
    # A summary the server cut is not one: none is logged ``ok`` without a finish reason,
    # and none is taken as ready with an empty text.
    for run in chat.runs():
        cut = [ended for ended in finishes(run, "compaction")
               if ended[0] == "ok" and ended[1] not in ("stop", "length")]
        assert not cut, f"summaries cut by the server taken as made: {cut}"
    for prepared in PreparedCompaction.objects.filter(session=chat.session, status="ready"):
        assert prepared.summary.strip()
