"""Memory across sessions on the real local servers (MEM-2, MEM-3): the request that
carries a person's memory after the instructions and offers the ``memory`` tool is one the
servers take — llama-cpp-python's chat templates read only string contents, so the two
system parts reach it as one string — and the next session of the same person carries
what the first saved, byte for byte, while another person's carries none of it."""
from __future__ import annotations

import pytest

from memory.selectors import MemoryOwner
from memory.services import memory_command
from sessions.models import ModelCall
from sessions.selectors.model_calls import model_call_body
from tests.local_servers.product import RealServerChat

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.local_server]

FACT = "Alice measures everything in metric units."


def _sent(run) -> dict:
    call = ModelCall.objects.filter(run=run, purpose="action").order_by("pk").last()
    assert call is not None, "no model call was logged"
    return model_call_body(call=call)


@pytest.mark.parametrize("server", ["real_llama_cpp_python", "real_llama_server"])
def test_mem3_a_request_with_memory_is_one_the_real_server_answers(server, request, space, alice, bob):
    real = request.getfixturevalue(server)
    chat = RealServerChat.open(real, space=space, user=alice, window=2048, max_output_tokens=48, memory=True)
    owner = MemoryOwner(space_id=space.pk, agent_id=chat.agent.pk, user_id=alice.pk)
    memory_command(owner=owner, arguments={"command": "create", "path": "/memories/units.md", "file_text": FACT},
                   by="person")

    run = chat.ask("Which units do I use? One word.")

    assert run.status == "completed", run.error
    body = _sent(run)
    system = body["messages"][0]
    assert system["role"] == "system" and isinstance(system["content"], str)  # one string: what templates read
    assert system["content"].startswith("Answer briefly.") and FACT in system["content"]
    assert "memory" in [tool["function"]["name"] for tool in body["tools"]]

    bobs = chat.for_user(bob).ask("Which units do I use? One word.")
    assert bobs.status == "completed", bobs.error
    assert FACT not in str(_sent(bobs))
