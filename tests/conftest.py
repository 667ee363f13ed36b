"""Shared fixtures: named people and the rows every test starts from (STYLE §13).

- alice: admin of the Acme space; owns sessions.
- bob: a member of the Acme space.
- mallory: an outsider with a space of her own.
"""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

# The real local model servers (llama-cpp-python's, llama.cpp's llama-server) as fixtures
# any test can ask for: tests/local_servers/fixtures.py.
pytest_plugins = ["tests.local_servers.fixtures"]



def pytest_generate_tests(metafunc):
    """A test module that sets ``DIALECTS = ("openai", "anthropic")`` runs each of its tests
    against both provider wires (``tests/runloop/conftest.py``: the fake provider speaks
    the dialect's own protocol); every other test runs on the OpenAI dialect."""
    if "dialect" in metafunc.fixturenames and hasattr(metafunc.module, "DIALECTS"):
        metafunc.parametrize("dialect", metafunc.module.DIALECTS)


@pytest.fixture
def dialect() -> str:
    """The provider wire of the run-loop fixtures, unless a module parametrizes it."""
    return "openai"


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Rate-limit counters live in the cache, and user ids repeat across tests."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _no_kept_run_html():
    """The chat keeps finished runs' HTML per process (web/rendered_runs.py), and a
    test database rolled back hands out its ids again: every test starts with none kept."""
    from web.rendered_runs import KEPT

    KEPT.clear()
    yield
    KEPT.clear()


@pytest.fixture(autouse=True)
def dispatched_runs():
    """Runs queued for a worker, recorded instead of sent to a broker nobody consumes.

    Tests that want a real worker put ``runloop.tasks.dispatch_run`` back.
    """
    from runloop.tasks import dispatch_run
    from sessions.services.dispatch import dispatcher_set

    queued: list[int] = []
    dispatcher_set(queued.append)
    yield queued
    dispatcher_set(dispatch_run)


@pytest.fixture(autouse=True)
def dispatched_compactions():
    """Manual compactions queued for a worker (CTX-43), recorded like ``dispatched_runs``."""
    from runloop.tasks import dispatch_compaction
    from sessions.services.dispatch import compaction_dispatcher_set

    queued: list[int] = []
    compaction_dispatcher_set(queued.append)
    yield queued
    compaction_dispatcher_set(dispatch_compaction)


@pytest.fixture(autouse=True)
def dispatched_preparations():
    """Summaries queued to be prepared in the background (CTX-45), recorded like
    ``dispatched_runs``; a test that wants them made runs ``compaction_prepare`` itself
    (``tests/runloop/preparing.py``) or puts the real dispatcher back."""
    from runloop.tasks import dispatch_preparation
    from sessions.services.dispatch import preparation_dispatcher_set

    queued: list[int] = []
    preparation_dispatcher_set(queued.append)
    yield queued
    preparation_dispatcher_set(dispatch_preparation)


@pytest.fixture(scope="session", autouse=True)
def _no_post_migrate_after_a_flush_that_kept_its_rows():
    """A transactional test's flush on the suite's PostgreSQL backend keeps the rows
    post_migrate makes (tests/db/postgresql/base.py): making them again is skipped. Django
    itself skips it when a test names its ``available_apps``."""
    from django.core.management.commands import flush
    from django.db import connections

    emit = flush.emit_post_migrate_signal

    def emit_unless_kept(verbosity, interactive, db, **kwargs):
        if not getattr(connections[db], "flush_keeps_post_migrate_rows", False):
            emit(verbosity, interactive, db, **kwargs)

    flush.emit_post_migrate_signal = emit_unless_kept
    yield
    flush.emit_post_migrate_signal = emit


@pytest.fixture(scope="session", autouse=True)
def _close_stray_connections(django_db_setup, django_db_blocker):
    """Live servers and tool threads leave PostgreSQL sessions open; end them so the
    test database can be dropped at the end of the run."""
    yield
    from django.db import connection

    # Only when a test database was set up: a run of tests that need none never made one,
    # and the database the settings name is not the suite's to clean.
    made = connection.settings_dict["NAME"] == connection.creation._get_test_db_name()
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql" and made:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def on_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


@pytest.fixture
def require_postgres():
    if not on_postgres():
        pytest.skip("needs PostgreSQL (set DATABASE_URL=postgres://…; CI does)")


def token_for(user, client: str = "tests") -> str:
    """A fresh API token of ``user`` for the ``Authorization: Token …`` header."""
    from core.accounts.services import token_issue

    return token_issue(user=user, client=client)[1]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="bob-password-1")


@pytest.fixture
def mallory(django_user_model):
    return django_user_model.objects.create_user(username="mallory", password="mallory-password-1")


@pytest.fixture
def alice_is_staff(alice):
    """Alice also runs the installation (staff): she reads why a connection to an address
    failed, which other space admins get as one answer (models_catalog/reachability.py)."""
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    return alice


@pytest.fixture
def olivia(django_user_model):
    """The operator: a staff superuser who reads other people's sessions in the console."""
    return django_user_model.objects.create_superuser(username="olivia", password="olivia-password-1",
                                                      email="olivia@example.com")


@pytest.fixture
def console(olivia):
    """The admin console, logged in as olivia."""
    from django.test import Client

    client = Client()
    client.force_login(olivia)
    return client


@pytest.fixture
def space(alice, bob):
    from core.spaces.models import Membership
    from core.spaces.services import membership_add, space_bootstrap_for_user

    acme = space_bootstrap_for_user(user=alice, name="Acme")
    membership_add(space=acme, user=bob, role=Membership.Role.MEMBER)
    return acme


@pytest.fixture
def mallory_space(mallory):
    from core.spaces.services import space_bootstrap_for_user

    return space_bootstrap_for_user(user=mallory, name="Mallory's")


@pytest.fixture
def demo_connection(space):
    from models_catalog.models import ModelConnection

    return ModelConnection.objects.create(space=space, name="Demo", provider="demo", model="agentloom-demo")


@pytest.fixture
def agent(space, demo_connection, alice):
    from agents.services import agent_create

    return agent_create(
        space=space,
        name="Helper",
        model_connection=demo_connection,
        instructions="Be brief.",
        tools=["calculator"],
        created_by=alice,
    )


@pytest.fixture
def version(agent, alice):
    from agents.services import agent_publish

    return agent_publish(agent=agent, published_by=alice)


@pytest.fixture
def make_session(space, agent, version):
    from sessions.models import Session

    def make(user, **extra):
        return Session.objects.create(space=space, user=user, agent=agent, version=version, **extra)

    return make
