"""LOOP-8 for what people type: a credential the runtime knows, pasted into a question, a
supplement, a session's title or an imported transcript, is stored as ``[REDACTED]``.

The credentials are those a run of the session's version holds
(``agents.server_tools.version_credentials``): the model connection's API key and the tool
servers' header and env values, found in every form the run loop's redactor knows
(``core.redaction``: any case, escaped, URL-encoded, hex, base64). Only those: were
every key of the platform looked for, the ``[REDACTED]`` a person sees would tell them which
string they pasted is somebody else's key.

The text is redacted before it is written anywhere — the record, the run's queue, the
title — so nothing downstream (events, the model, the console, the logs) ever holds it.
"""
from __future__ import annotations

from typing import Any

from agents.server_tools import version_credentials
from core.redaction import Redactor


def pasted_redactor(*, version: Any) -> Redactor:
    """The redactor of what a person types into a session of ``version`` (reads the
    connection's key and the version's tool servers: a query or two)."""
    return Redactor(version_credentials(version=version))
