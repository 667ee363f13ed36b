"""The product's run loop against the real servers: the helpers other tests build on work."""
from __future__ import annotations

import pytest

from tests.local_servers.product import RealServerChat

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.local_server]


def test_alice_gets_an_answer_from_the_real_llama_cpp_python_server(real_llama_cpp_python, space, alice):
    chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice, window=2048, max_output_tokens=64)

    run = chat.ask("What is the capital of France? One word.")

    assert run.status == "completed", run.error if hasattr(run, "error") else run
    assert chat.runs() == [run]


def test_alice_gets_an_answer_from_the_real_llama_server(real_llama_server, space, alice):
    chat = RealServerChat.open(real_llama_server, space=space, user=alice, window=2048, max_output_tokens=64)

    run = chat.ask("What is the capital of France? One word.")

    assert run.status == "completed"
