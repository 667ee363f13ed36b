"""One failed-login limit over the three doors — /login/, /admin/login/, POST /api/v1/auth/token —
per client address and per username (SPEC §11, issue #44 item 11).

Each door used to keep its own count (the two pages one, the API another): an address had
twenty guesses a minute instead of ten, and a guesser with many addresses had no limit on
one person's password at all.
"""
from __future__ import annotations

import time

import pytest
from django.test import Client

from core.accounts.login_limit import LOCKED_MESSAGE, login_attempt_start
from core.accounts.models import ApiToken
from tests.security.conftest import assert_error_shape

pytestmark = pytest.mark.django_db

PASSWORD = "olivia-password-1"  # olivia is staff: her password opens every door


def _from(address: str) -> Client:
    """A browser or API client at ``address`` (the TCP peer: no proxy is configured)."""
    return Client(REMOTE_ADDR=address)


def api_door(client: Client, username: str, password: str):
    return client.post("/api/v1/auth/token", {"username": username, "password": password},
                       content_type="application/json")


def chat_door(client: Client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


def console_door(client: Client, username: str, password: str):
    return client.post("/admin/login/?next=/admin/", {"username": username, "password": password})


DOORS = {"api": api_door, "chat": chat_door, "console": console_door}


def _failed(door: str, response) -> bool:
    """A wrong password's answer at that door (not a refusal by the limit)."""
    if door == "api":
        return response.status_code == 401 and response.json()["error"]["code"] == "bad_credentials"
    return response.status_code == 200 and LOCKED_MESSAGE.encode() not in response.content


def _refused(door: str, response) -> bool:
    """The limit's refusal at that door: 429 with Retry-After, in the API's shape or as the form's error."""
    if response.status_code != 429 or not 1 <= int(response["Retry-After"]) <= 61:
        return False
    if door == "api":
        return assert_error_shape(response)["code"] == "rate_limited"
    page = response.content.decode()
    shown = "Too many failed attempts from your address or for this username" if door == "chat" else LOCKED_MESSAGE
    return shown in page and 'name="password"' in page  # the form again, its error above it


def _logged_in(door: str, client: Client, response) -> bool:
    if door == "api":
        return response.status_code == 200 and "token" in response.json()
    return response.status_code == 302 and "_auth_user_id" in client.session


def test_eleven_guesses_spread_over_the_three_doors_are_refused_and_so_is_the_right_password(olivia):
    client = _from("203.0.113.5")
    guesses = ["api", "chat", "console"] * 3 + ["api"]  # ten failures, every door used
    for number, door in enumerate(guesses):
        assert _failed(door, DOORS[door](client, "olivia", f"guess-{number}")), (number, door)
    for door, attempt in DOORS.items():  # the eleventh guess, at any door
        assert _refused(door, attempt(client, "olivia", "guess-11")), door
    for door, attempt in DOORS.items():  # the right password is not even checked while locked
        response = attempt(client, "olivia", PASSWORD)
        assert _refused(door, response) and not _logged_in(door, client, response), door
    assert not ApiToken.objects.filter(user=olivia).exists()


@pytest.mark.parametrize("door", DOORS)
def test_one_username_guessed_from_many_addresses_is_locked_at_every_door(olivia, bob, door):
    doors = list(DOORS.values())
    for number in range(10):
        response = doors[number % 3](_from(f"198.51.100.{number}"), "olivia", f"guess-{number}")
        assert response.status_code in {200, 401}, number
    fresh = _from("192.0.2.77")
    assert _refused(door, DOORS[door](fresh, "olivia", PASSWORD))
    assert _refused(door, DOORS[door](fresh, "OLIVIA ", PASSWORD))  # the same name, typed otherwise
    other = DOORS[door](fresh, "bob", "bob-password-1")  # the address itself is not locked
    assert not _refused(door, other)


@pytest.mark.parametrize("door", DOORS)
def test_one_address_guessing_many_usernames_is_locked_at_every_door(olivia, door):
    client = _from("203.0.113.9")
    for number in range(10):
        list(DOORS.values())[number % 3](client, f"nobody-{number}", "guess")
    assert _refused(door, DOORS[door](client, "olivia", PASSWORD))
    elsewhere = _from("203.0.113.10")
    assert _logged_in(door, elsewhere, DOORS[door](elsewhere, "olivia", PASSWORD))


def test_right_passwords_are_never_counted_only_failures(olivia):
    client = _from("203.0.113.20")
    for number in range(9):
        api_door(client, "olivia", f"guess-{number}")
    for door, attempt in DOORS.items():  # an office behind one address logs in all morning
        session = _from("203.0.113.20")
        assert _logged_in(door, session, attempt(session, "olivia", PASSWORD)), door
    assert _failed("chat", chat_door(client, "olivia", "guess-9"))  # the tenth failure is still allowed
    assert _refused("chat", chat_door(client, "olivia", "guess-10"))


def test_a_form_without_a_password_checks_nothing_and_counts_nothing(olivia):
    client = _from("203.0.113.30")
    for _ in range(12):
        assert client.post("/login/", {"username": "olivia"}).status_code == 200
        assert api_door(client, "olivia", "").status_code == 400
    assert _logged_in("chat", client, chat_door(client, "olivia", PASSWORD))


def test_attempts_in_flight_hold_their_slots_so_a_burst_cannot_outrun_the_count(rf, settings):
    """The slot is taken before the password is checked: ten guesses still being checked
    (none failed yet) leave no room for an eleventh."""
    request = rf.post("/login/", REMOTE_ADDR="203.0.113.40")
    in_flight = [login_attempt_start(request=request, username=f"user-{n}") for n in range(10)]
    assert not any(attempt.refused for attempt in in_flight)
    assert login_attempt_start(request=request, username="someone-else").refused


def test_the_lock_ends_when_the_window_that_began_with_the_first_failure_has_passed(olivia, settings):
    settings.AGENTLOOM_LOGIN_LIMIT = (3, 1)  # three failures a second: the window can pass in a test
    client = _from("203.0.113.50")
    first_failure = time.monotonic()
    for number in range(3):
        assert _failed("api", api_door(client, "olivia", f"guess-{number}"))
    deadline = time.monotonic() + 30
    while True:  # the right password, until the lock lets it through
        response = api_door(client, "olivia", PASSWORD)
        if response.status_code == 200:
            break
        assert _refused("api", response) and time.monotonic() < deadline, response.content
    assert time.monotonic() - first_failure >= 1.0  # never before the window had passed
