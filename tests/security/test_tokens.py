"""API tokens (SPEC §9, §11): stored as hashes, one per client, with an expiry, revocable
through the API and the console, all revoked by a password change. ``POST
/api/v1/auth/token {username, password}`` still answers ``200 {"token"}``; a wrong
password is a 401."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.utils import timezone

from tests.security.conftest import assert_error_shape

pytestmark = pytest.mark.django_db


def _login(username: str = "alice", password: str = "alice-password-1", **extra):
    return Client().post("/api/v1/auth/token", {"username": username, "password": password, **extra},
                         content_type="application/json")


def _with(key: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {key}")


def _works(key: str) -> bool:
    response = _with(key).get("/api/v1/sessions")
    if response.status_code != 200:
        assert_error_shape(response, 401)
        assert response["WWW-Authenticate"] == "Token"
    return response.status_code == 200


def test_a_username_and_password_still_get_a_working_token_in_spec_9s_shape(alice, space):
    response = _login()
    assert response.status_code == 200
    body = response.json()
    assert isinstance(body["token"], str) and len(body["token"]) >= 32
    assert body["client"] == "default" and body["expires_at"]
    assert _works(body["token"])


@pytest.mark.parametrize("username, password", [("alice", "wrong"), ("nobody", "alice-password-1")])
def test_wrong_credentials_are_a_401_in_the_error_shape(alice, username, password):
    error = assert_error_shape(_login(username, password), 401)
    assert error["code"] == "bad_credentials"


def test_an_inactive_account_gets_no_token(alice):
    alice.is_active = False
    alice.save()
    assert assert_error_shape(_login(), 401)["code"] == "bad_credentials"


def test_a_token_is_stored_only_as_a_hash(alice, space):
    key = _login().json()["token"]
    with connection.cursor() as cursor:
        for model in apps.get_models():
            cursor.execute(f'SELECT * FROM "{model._meta.db_table}"')  # noqa: S608 - table names from the models
            assert key not in repr(cursor.fetchall()), model._meta.db_table
    assert _works(key)


def test_a_token_stops_working_when_it_expires(alice, space, settings):
    from core.accounts.models import ApiToken

    body = _login().json()
    token = ApiToken.objects.get(user=alice)
    assert abs(token.expires_at - (timezone.now() + timedelta(days=settings.AGENTLOOM_TOKEN_DAYS))) < timedelta(
        minutes=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert not _works(body["token"])
    assert not ApiToken.objects.filter(pk=token.pk).exists()  # an expired token is removed when it is seen


def test_each_client_has_its_own_token_and_logging_in_again_replaces_only_that_clients(alice, space):
    laptop = _login(client="laptop").json()["token"]
    ci = _login(client="ci").json()["token"]
    assert _works(laptop) and _works(ci)
    laptop_again = _login(client="laptop").json()["token"]
    assert laptop_again != laptop
    assert not _works(laptop) and _works(laptop_again) and _works(ci)


@pytest.mark.parametrize("client_name", ["", " ", "x" * 101, 7])
def test_a_bad_client_name_is_a_400_naming_the_field(alice, client_name):
    response = _login(client=client_name)
    assert "client" in assert_error_shape(response, 400)["fields"]


def test_a_person_lists_their_tokens_without_keys_and_revokes_one(alice, bob, space):
    laptop = _login(client="laptop").json()["token"]
    ci = _login(client="ci").json()["token"]
    bobs = _login("bob", "bob-password-1").json()["token"]
    listing = _with(laptop).get("/api/v1/auth/tokens")
    assert listing.status_code == 200
    rows = listing.json()
    assert sorted(row["client"] for row in rows) == ["ci", "laptop"]
    assert [row["current"] for row in rows if row["client"] == "laptop"] == [True]
    assert laptop not in listing.content.decode() and ci not in listing.content.decode()
    ci_id = next(row["id"] for row in rows if row["client"] == "ci")
    bobs_id = _with(bobs).get("/api/v1/auth/tokens").json()[0]["id"]
    assert_error_shape(_with(laptop).delete(f"/api/v1/auth/tokens/{bobs_id}"), 404)  # not someone else's
    assert _works(bobs)
    assert _with(laptop).delete(f"/api/v1/auth/tokens/{ci_id}").status_code == 204
    assert not _works(ci) and _works(laptop)
    assert _with(laptop).delete("/api/v1/auth/tokens/current").status_code == 204  # logging out
    assert not _works(laptop)


def test_a_password_change_revokes_every_token_of_that_person(alice, bob, space):
    mine = [_login(client=name).json()["token"] for name in ("laptop", "ci")]
    bobs = _login("bob", "bob-password-1").json()["token"]
    alice.set_password("a-brand-new-password-9")
    alice.save()
    assert [_works(key) for key in mine] == [False, False]
    assert _works(bobs)
    assert _works(_login(password="a-brand-new-password-9").json()["token"])


def test_a_password_changed_in_the_console_revokes_the_tokens_too(alice, space, django_user_model):
    key = _login().json()["token"]
    root = django_user_model.objects.create_superuser(username="root", password="root-password-1")
    console = Client()
    console.force_login(root)
    response = console.post(f"/admin/auth/user/{alice.pk}/password/",
                            {"password1": "console-set-password-7", "password2": "console-set-password-7",
                             "usable_password": "true"})
    assert response.status_code == 302
    assert not _works(key)


def test_the_console_lists_tokens_without_their_keys_and_revokes_them(alice, space, django_user_model):
    from core.accounts.models import ApiToken

    key = _login(client="laptop").json()["token"]
    root = django_user_model.objects.create_superuser(username="root", password="root-password-1")
    console = Client()
    console.force_login(root)
    page = console.get("/admin/accounts/apitoken/")
    assert page.status_code == 200 and b"laptop" in page.content and key.encode() not in page.content
    assert console.get("/admin/accounts/apitoken/add/").status_code == 403  # tokens come from logging in
    token = ApiToken.objects.get(user=alice)
    response = console.post("/admin/accounts/apitoken/", {"action": "delete_selected", "_selected_action": [token.pk],
                                                          "post": "yes"})
    assert response.status_code == 302
    assert not _works(key)


@pytest.mark.django_db(transaction=True)
def test_tokens_stored_in_clear_by_an_earlier_version_are_carried_over_hashed(alice, space):
    from django.db.migrations.executor import MigrationExecutor

    from core.accounts.models import ApiToken, key_digest

    clear_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:  # the table Django REST framework's authtoken app made
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) NOT NULL PRIMARY KEY, "
                       "created timestamp NOT NULL, user_id bigint NOT NULL UNIQUE)")
        cursor.execute("INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
                       [clear_key, timezone.now(), alice.pk])
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([("accounts", "0001_initial")])
        executor.loader.build_graph()
        executor.migrate([("accounts", "0002_tokens_from_authtoken")])
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM authtoken_token")
            assert cursor.fetchone()[0] == 0  # no clear copy left behind
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE authtoken_token")
    token = ApiToken.objects.get(user=alice)
    assert token.key_hash == key_digest(clear_key) and token.client == "default"
    assert _works(clear_key)  # the client that had it keeps working
