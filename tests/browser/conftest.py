"""Browser tests: Debian's Chromium driven by Playwright against the platform served by
uvicorn in this process (tests/runloop/livesrv.py), runs executed by worker threads.

Never ``playwright install``: the browser is the system's ``/usr/bin/chromium``
(``apt-get install chromium``; ``.ci/run`` installs it). Without it, or without the
``playwright`` package, every test here is skipped with the reason.
Screenshots land in ``var/screenshots/`` (git-ignored).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM = os.environ.get("AGENTLOOM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
FAKE_KEY = "sk-browser-fake-key-0123456789"
PASSWORD = "alice-password-1"  # tests/conftest.py's alice


def _why_no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -c constraints.txt -e '.[dev]')"
    if not os.path.isfile(CHROMIUM) or not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; never `playwright install`)"
    return None


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module.

    Playwright's sync API keeps an event loop in the test's thread for as long as it runs;
    Django would take the tests' own set-up and tear-down queries for async code and
    refuse them. So the check is off exactly while Playwright runs (module scope: the
    rest of the suite keeps it), and the server under test runs in its own threads.
    """
    reason = _why_no_browser()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Exception as exc:  # a broken install: say so instead of erroring every test
            pytest.skip(f"Chromium at {CHROMIUM} did not start under Playwright: {exc}")
        yield chromium
        chromium.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def _fresh_login_limits():
    """Failed-login counters live in the cache, shared with the server in this process."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def _sqlite_read_uncommitted(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")


@pytest.fixture(autouse=True)
def _shared_memory_sqlite_without_table_locks(transactional_db):
    """SQLite's in-memory test database is one shared cache: a reader of a table that a
    worker is writing gets "database table is locked" at once (the busy timeout does not
    apply to shared-cache locks). A file database or PostgreSQL has no such locks; here
    readers read without taking them, so the streams, the pages and the worker threads
    of a browser test do not trip over each other."""
    from django.db import connection
    from django.db.backends.signals import connection_created

    connection_created.connect(_sqlite_read_uncommitted)
    if connection.vendor == "sqlite" and connection.connection is not None:
        _sqlite_read_uncommitted(None, connection)
    yield
    connection_created.disconnect(_sqlite_read_uncommitted)


@pytest.fixture
def worker_threads(transactional_db) -> Iterator[list[threading.Thread]]:
    """Runs and manual compactions are executed by a thread each, as a worker would;
    joined at the end so no run writes into the next test's database."""
    from runloop.compaction_manual import compaction_manual
    from runloop.loop import run_execute
    from sessions.services.dispatch import compaction_dispatcher_set, dispatcher_set

    threads: list[threading.Thread] = []

    def in_thread(work: Callable[..., object], name: str) -> Callable[[int], None]:
        def execute(run_id: int) -> None:
            try:
                work(run_id=run_id)
            finally:
                connections.close_all()

        def dispatch(run_id: int) -> None:
            thread = threading.Thread(target=execute, args=(run_id,), daemon=True, name=f"{name}-{run_id}")
            threads.append(thread)
            thread.start()

        return dispatch

    dispatcher_set(in_thread(run_execute, "run"))
    compaction_dispatcher_set(in_thread(compaction_manual, "compaction"))
    yield threads
    for thread in threads:
        thread.join(timeout=20)


@pytest.fixture
def server(transactional_db, worker_threads):
    from tests.runloop.livesrv import LiveServer

    with LiveServer() as live:
        yield live


@pytest.fixture
def page_factory(browser) -> Iterator[Callable]:
    """New browser pages (own context, so own cookies); each records dialogs and script errors."""
    contexts = []

    def make(*, width: int = 1200, height: int = 850, mobile: bool = False):
        context = browser.new_context(viewport={"width": width, "height": height}, is_mobile=mobile,
                                      has_touch=mobile, device_scale_factor=2 if mobile else 1)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        # An assertion waits for its condition as long as an action may (Playwright's own
        # default is 5 s): on a busy 2-core machine a page's first fetches can take longer.
        from playwright.sync_api import expect
        expect.set_options(timeout=10_000)
        page.dialogs = []
        page.script_errors = []

        def on_dialog(dialog) -> None:
            page.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: page.script_errors.append(str(error)))
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(page_factory):
    return page_factory()


@pytest.fixture
def fake_provider():
    from tests.fakes.fake_provider import FakeProvider

    with FakeProvider() as fake:
        yield fake


@pytest.fixture
def fake_session(space, alice, fake_provider):
    """A session of alice's with an agent on the fake provider; set ``fake_provider.handler``."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    def make(*, tools=("calculator",), name: str = "Fake agent") -> Session:
        connection = ModelConnection.objects.create(
            space=space, name=f"{name} connection", provider="openai_compatible", base_url=fake_provider.base_url,
            api_key=FAKE_KEY, model="fake-model", context_window=32_768, max_output_tokens=1_024)
        agent = agent_create(space=space, name=name, model_connection=connection, instructions="Be brief.",
                             tools=list(tools), created_by=alice)
        version = agent_publish(agent=agent, published_by=alice)
        return Session.objects.create(space=space, user=alice, agent=agent, version=version)

    return make


LAST_RUN = "#transcript section.run:last-of-type"
SETTLED = f"{LAST_RUN}:not([data-live])"
STREAMING = f"{LAST_RUN} .bubble.streaming"


def words(count: int) -> list[str]:
    return [f"word{i} " for i in range(count)]


def ask(page, text: str) -> None:
    page.get_by_label("Your question").fill(text)
    page.get_by_label("Your question").press("Enter")


def answer_text(page) -> str:
    return " ".join(page.locator(f"{LAST_RUN} .bubble-assistant").all_inner_texts())


def log_in(page, server, username: str = "alice", password: str = PASSWORD, *, next_path: str = "/") -> None:
    page.goto(f"{server.url}/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}{next_path}")


def screenshot(page, name: str, *, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
