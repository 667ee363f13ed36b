"""The connection form as a newcomer first sees it (SPEC §10): the one space there is
already chosen, no stored key to show or remove on a new connection, and Discover and Test
right under the model they fill in and try."""
from __future__ import annotations

import re

import pytest

from tests.catalog_api.conftest import CONNECTIONS

pytestmark = pytest.mark.django_db


def _selected_space(html: str) -> list[str]:
    select = re.search(r'<select name="space"[^>]*>(.*?)</select>', html, re.S)
    assert select is not None
    return re.findall(r'<option value="(\d+)" selected>', select.group(1))


def test_the_one_space_there_is_starts_chosen(operator, space):
    assert _selected_space(operator.get(f"{CONNECTIONS}add/").content.decode()) == [str(space.pk)]


def test_with_two_spaces_none_is_chosen_for_the_admin(operator, space, bob):
    from core.spaces.services import space_bootstrap_for_user

    space_bootstrap_for_user(user=bob, name="Bob's lab")
    assert _selected_space(operator.get(f"{CONNECTIONS}add/").content.decode()) == []


def test_a_new_connection_shows_no_stored_key_and_no_box_to_remove_it(operator, space, make_connection):
    added = operator.get(f"{CONNECTIONS}add/").content.decode()
    assert 'name="api_key"' in added
    assert "Stored key" not in added and "None stored" not in added
    assert "Remove the stored key" not in added and 'name="clear_api_key"' not in added
    changed = operator.get(f"{CONNECTIONS}{make_connection().pk}/change/").content.decode()
    assert "Stored key" in changed and 'name="clear_api_key"' in changed


def test_discover_and_test_come_right_after_the_model_field(operator, space):
    html = operator.get(f"{CONNECTIONS}add/").content.decode()
    model, tools, window = (html.index(marker) for marker in (
        'name="model"', 'id="discover-models"', 'name="context_window"'))
    assert model < tools < window
    assert html.index('id="test-connection"') < window
    assert html.index('id="discover-results"') < window
