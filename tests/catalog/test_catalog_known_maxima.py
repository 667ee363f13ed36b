"""The rules of known maxima (CAT-3) and per-figure sources (CAT-2), for every history of
writes to one connection, on ``connection_validate`` itself (no database, no network).

A vLLM-like model whose provider said: window 40,960, maximum output 8,192. Whatever
sequence of creates and partial updates an admin sends — figures typed or left out, with
or without a fresh discovery result, the base URL re-spelled — as long as the model and
its endpoint stay:

* no accepted write leaves a figure above its maximum, and a refused one names the field
  and the maximum;
* the maxima stay stored, with their source;
* a figure whose source is ``provider`` is the figure the provider attested.
"""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ValidationFailed
from models_catalog.discovery import resolve_figures
from models_catalog.models import ModelConnection
from models_catalog.providers import RawModel
from models_catalog.validation import connection_validate, discovery_token_make

BASE_URL = "http://127.0.0.1:8000/v1"
MODEL = "Qwen/Qwen3-8B"
FOUND = resolve_figures(RawModel(id=MODEL, context_window=40_960, max_output_tokens=8_192), entry=None,
                        manifest_version=None)
TOKEN = discovery_token_make(provider="openai_compatible", base_url=BASE_URL, model=FOUND)
MAXIMA = {"context_window": 40_960, "max_output_tokens": 8_192}
ATTESTED = {"context_window": FOUND.context_window, "max_output_tokens": FOUND.max_output_tokens}

writes = st.fixed_dictionaries({}, optional={
    "context_window": st.integers(1, 300_000),
    "max_output_tokens": st.integers(1, 20_000),
    "safety_margin_tokens": st.integers(0, 4_096),
    "name": st.sampled_from(["Lab", "Lab two"]),
    "base_url": st.sampled_from([BASE_URL, BASE_URL + "/"]),
    "discovery_token": st.just(TOKEN),
})


def apply(connection: ModelConnection, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        setattr(connection, name, value)


def check_refusal(refused: ValidationFailed) -> None:
    for figure, maximum in MAXIMA.items():
        message = refused.fields.get(figure, "")
        if message.startswith("at most "):
            assert message.startswith(f"at most {maximum:,} for {MODEL} (its "), message


@settings(max_examples=150, deadline=None)
@given(first=writes, history=st.lists(writes, max_size=10))
def test_no_history_of_writes_passes_a_known_maximum_or_loses_it(first, history):
    connection = ModelConnection(space_id=1)
    create = {"name": "Lab", "provider": "openai_compatible", "model": MODEL, "base_url": BASE_URL,
              **first, "discovery_token": TOKEN}
    for number, data in enumerate([create, *history]):
        try:
            fields = connection_validate(connection=None if number == 0 else connection, data=data)
        except ValidationFailed as refused:
            check_refusal(refused)
            if number == 0:
                return
            continue
        apply(connection, fields)
        for figure, maximum in MAXIMA.items():
            assert getattr(connection, figure) <= maximum
            assert (getattr(connection, f"{figure}_maximum"),
                    getattr(connection, f"{figure}_maximum_source")) == (maximum, "provider")
            if getattr(connection, f"{figure}_source") == "provider":
                assert getattr(connection, figure) == ATTESTED[figure]


def test_each_figure_keeps_its_own_source_from_the_token():
    fields = connection_validate(connection=None, data={
        "name": "Lab", "provider": "openai_compatible", "model": MODEL, "base_url": BASE_URL,
        "discovery_token": TOKEN, "max_output_tokens": 8_000})
    assert (fields["context_window_source"], fields["max_output_tokens_source"]) == ("provider", "manual")


def test_a_model_nobody_published_a_maximum_for_keeps_what_the_admin_types():
    fields = connection_validate(connection=None, data={
        "name": "Lab", "provider": "openai_compatible", "model": "my-own-model", "base_url": BASE_URL,
        "context_window": 1_000_000, "max_output_tokens": 100_000})
    assert (fields["context_window_maximum"], fields["max_output_tokens_maximum"]) == (None, None)
