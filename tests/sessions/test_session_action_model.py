"""Where a session's action calls went, kept on its row (``Session.action_model``): a run
learns whether an earlier call went to another model (CTX-11: signed thinking goes back
only to the model that wrote it) from one read, however long the session (issue #29).
The run loop notes it before a run's first action call; the CTX-11 cases through the loop
and the strict Anthropic server are in tests/runloop/test_model_switch.py.
"""
from __future__ import annotations

import pytest
from django.db import connection

from sessions.models import Instance, ModelCall, Run, Session
from sessions.selectors.sessions import session_traits
from sessions.services.model_calls import session_action_model_note

pytestmark = pytest.mark.django_db


def _traits(session, model):
    return session_traits(session_id=session.pk, provider="anthropic", model=model)


def test_a_session_without_calls_has_no_other_model_and_has_noted_none(alice, make_session):
    session = make_session(alice)
    traits = _traits(session, "claude-a")
    assert (traits.other_models, traits.model_noted) == (False, False)


def test_calls_to_one_model_are_no_other_model_for_it_and_another_for_the_rest(alice, make_session):
    session = make_session(alice)
    for _ in range(2):  # every run of it notes the same
        session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-a")
    assert (_traits(session, "claude-a").other_models, _traits(session, "claude-a").model_noted) == (False, True)
    assert (_traits(session, "claude-b").other_models, _traits(session, "claude-b").model_noted) == (True, False)
    other_provider = session_traits(session_id=session.pk, provider="openai", model="claude-a")
    assert other_provider.other_models is True


def test_once_two_models_were_called_every_model_is_another(alice, make_session):
    session = make_session(alice)
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-a")
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-b")
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-a")  # back: still mixed
    for model in ("claude-a", "claude-b", "claude-c"):
        assert _traits(session, model).other_models is True


def test_a_mixed_session_is_noted_already_for_every_model(alice, make_session):
    session = make_session(alice)
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-a")
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-b")
    assert _traits(session, "claude-c").model_noted is True  # a run of it writes nothing


def _logged_unnoted(session, model):
    """An action call a worker of the version before ``Session.action_model`` logged
    while the platform was upgraded: nothing noted."""
    run = Run.objects.create(session=session, version=session.version, status=Run.Status.COMPLETED)
    instance = Instance.objects.create(run=run, key=Instance.MAIN)
    ModelCall.objects.create(run=run, instance=instance, provider="anthropic", model=model, estimator_id="bytes-v1")


def test_a_session_that_noted_nothing_has_its_calls_looked_at(alice, make_session):
    session = make_session(alice)
    _logged_unnoted(session, "claude-a")
    assert (_traits(session, "claude-a").other_models, _traits(session, "claude-a").model_noted) == (False, False)
    moved = _traits(session, "claude-b")
    assert (moved.other_models, moved.model_noted) == (True, False)
    # The run of the other model notes what its traits found: both, not its own alone.
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-b",
                              other_models=moved.other_models)
    assert Session.objects.get(pk=session.pk).action_model == Session.MIXED_MODELS
    assert _traits(session, "claude-a").other_models is True


def test_a_note_changes_only_its_own_session(alice, bob, make_session):
    mine, theirs = make_session(alice), make_session(bob)
    session_action_model_note(session_id=theirs.pk, provider="anthropic", model="claude-b")
    assert _traits(mine, "claude-a").other_models is False
    assert Session.objects.get(pk=mine.pk).action_model == ""


def test_traits_asked_without_a_model_and_of_no_session_say_no_other_model(alice, make_session):
    session = make_session(alice)
    session_action_model_note(session_id=session.pk, provider="anthropic", model="claude-a")
    assert session_traits(session_id=session.pk).other_models is False
    assert session_traits(session_id=10**9, provider="anthropic", model="claude-a").other_models is False


@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_the_column_from_the_calls_already_logged(alice, make_session):
    from django.db.migrations.executor import MigrationExecutor

    one, two, none = make_session(alice), make_session(alice), make_session(alice)
    for session, models in ((one, ["claude-a", "claude-a"]), (two, ["claude-a", "gpt-4o"])):
        for model in models:
            run = Run.objects.create(session=session, version=session.version, status=Run.Status.COMPLETED)
            instance = Instance.objects.create(run=run, key=Instance.MAIN)
            ModelCall.objects.create(run=run, instance=instance, provider="anthropic", model=model,
                                     estimator_id="bytes-v1")
            # A compaction call to another model is not an action call: it changes nothing.
            ModelCall.objects.create(run=run, instance=instance, purpose=ModelCall.Purpose.COMPACTION,
                                     provider="openai", model="summarizer", estimator_id="bytes-v1")
    executor = MigrationExecutor(connection)
    executor.migrate([("agent_sessions", "0011_fewer_indexes")])
    executor.loader.build_graph()
    try:
        executor.migrate([("agent_sessions", "0013_session_action_model_fill")])
        marks = dict(Session.objects.filter(pk__in=[one.pk, two.pk, none.pk]).values_list("pk", "action_model"))
        assert marks == {one.pk: "anthropic:claude-a", two.pk: Session.MIXED_MODELS, none.pk: ""}
    finally:  # the later migrations back, for the tests that follow
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())  # every app: going back took the apps built on it back too
    assert _traits(one, "claude-a").other_models is False and _traits(two, "claude-a").other_models is True
