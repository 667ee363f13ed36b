"""The connection form shown again with its errors, whatever was left blank (SPEC §10)."""
from __future__ import annotations

import pytest

from tests.catalog_api.conftest import CONNECTIONS, assert_no_secret, connection_form

pytestmark = pytest.mark.django_db


def test_a_blank_margin_beside_another_error_shows_the_form_with_its_errors(operator, space, make_connection):
    connection = make_connection()
    page = operator.post(f"{CONNECTIONS}{connection.pk}/change/", connection_form(
        space, name="", context_window="32768", max_output_tokens="4096", safety_margin_tokens=""))
    assert page.status_code == 200
    html = page.content.decode()
    assert "errornote" in html and "This field is required" in html
    assert "Shown once saved" in html  # the effective input waits for the blank margin's default
    assert_no_secret(html)


def test_a_new_connection_with_blank_figures_and_an_error_shows_the_form(operator, space):
    page = operator.post(f"{CONNECTIONS}add/", connection_form(space, name="", base_url="not a url"))
    assert page.status_code == 200
    assert "errornote" in page.content.decode()
