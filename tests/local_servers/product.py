"""The product's real run loop against a real local server: connection, agent, session, questions.

For the long-conversation tests of issue #45 (windows entered, discovered and wrong; two
people at once; a Chinese conversation; a stuck session recovering)::

    def test_long_chat(real_llama_cpp_python, space, alice):
        chat = RealServerChat.open(real_llama_cpp_python, space=space, user=alice, window=2048)
        run = chat.ask("Tell me about the tides.")
        assert run.status == "completed"

Everything goes through the product's own services (``agent_create``, ``agent_publish``,
``question_ask``, ``run_execute``), synchronously in the test's process as a worker runs it
(``tests/runloop/driving.py``); the only thing not the product's is the server, which is real.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.local_servers.fixtures import RealServer
from tests.runloop.driving import ask_and_run


def real_connection(server: RealServer, *, space, name: str | None = None, window: int | None = None,
                    max_output_tokens: int | None = None, **fields: Any):
    """An ``openai_compatible`` connection to ``server`` (no key: local servers take none).
    ``window`` None keeps the platform's default, as a newcomer who entered none has."""
    from models_catalog.models import ModelConnection

    values: dict[str, Any] = dict(space=space, name=name or f"Real {server.kind}", provider="openai_compatible",
                                  base_url=server.base_url, api_key="", model=server.model, **fields)
    if window is not None:
        values["context_window"] = window
    if max_output_tokens is not None:
        values["max_output_tokens"] = max_output_tokens
    return ModelConnection.objects.create(**values)


@dataclass
class RealServerChat:
    """One person's session with an agent on a real server, and the runs it asked."""

    server: RealServer
    connection: Any
    agent: Any
    version: Any
    session: Any

    @classmethod
    def open(cls, server: RealServer, *, space, user, connection=None, window: int | None = None,
             max_output_tokens: int | None = None, instructions: str = "Answer briefly.",
             tools: tuple[str, ...] = (), limits: dict[str, Any] | None = None,
             context_policy: dict[str, Any] | None = None, memory: bool = False) -> RealServerChat:
        """A connection (unless given), an agent published by ``user``, and ``user``'s session."""
        from agents.services import agent_create, agent_publish
        from sessions.models import Session

        connection = connection or real_connection(server, space=space, window=window,
                                                   max_output_tokens=max_output_tokens)
        agent = agent_create(space=space, name=f"On {server.kind}", model_connection=connection,
                             instructions=instructions, tools=list(tools), limits=limits,
                             context_policy=context_policy, created_by=user)
        if memory:  # MEM-1: the draft's flag, frozen at publish
            agent.memory = True
            agent.save(update_fields=["memory"])
        version = agent_publish(agent=agent, published_by=user)
        session = Session.objects.create(space=space, user=user, agent=agent, version=version)
        return cls(server=server, connection=connection, agent=agent, version=version, session=session)

    def for_user(self, user) -> RealServerChat:
        """Another person's session on the same agent and version (two people at once)."""
        from sessions.models import Session

        session = Session.objects.create(space=self.session.space, user=user, agent=self.agent, version=self.version)
        return RealServerChat(server=self.server, connection=self.connection, agent=self.agent,
                              version=self.version, session=session)

    def ask(self, question: str):
        """Ask and run to the end through the product's loop; the run as it ended."""
        return ask_and_run(self.session, question)

    def runs(self):
        return list(self.session.runs.order_by("pk"))
