"""What the context inspector's "Copy as JSON" and "Copy as cURL" copy for a call: the body
exactly as sent, and a cURL command posting it to the provider's chat endpoint with the key
read from ``$API_KEY`` (``models_catalog.request_copy``). Read inside the inspector's
audited transaction: the body is decrypted here.
"""
from __future__ import annotations

from dataclasses import dataclass

from models_catalog.providers import find_provider, provider_label
from models_catalog.request_copy import body_json, chat_endpoint, curl_command
from models_catalog.selectors import connection_has_key
from sessions.admin.inspector import body_fields
from sessions.models import ModelCall, Run
from sessions.selectors.model_calls import model_call_body


@dataclass(frozen=True)
class RequestCopy:
    """The call's request to run again by hand: its body as JSON, and a cURL command
    (``curl`` "" with ``curl_missing`` saying why when there is no endpoint to call)."""

    json: str
    curl: str
    curl_missing: str


def request_copy(run: Run, call: ModelCall) -> RequestCopy | None:
    """What "copy as JSON / cURL" copies: the body exactly as sent (decrypted: called inside
    the audited read), posted to the endpoint of the run's version. None when the whole
    body was not kept (logged before bodies were, or dropped by retention)."""
    if body_fields(call.request) is None:
        return None
    body = model_call_body(call=call)
    version = run.version
    if call.provider != version.provider:
        endpoint = None
        missing = "This call went to another provider than the version's: its address is not known here."
    else:
        # The key header when the version's connection holds a key (its masked hint says so;
        # the key is never read); a connection deleted since: when the provider needs one.
        has_key = connection_has_key(connection_id=version.model_connection_id)
        spec = find_provider(call.provider)
        with_key = has_key if has_key is not None else bool(spec and spec.requires_api_key)
        endpoint = chat_endpoint(provider=call.provider, base_url=version.base_url, with_key=with_key, body=body)
        missing = "" if endpoint is not None else (
            f"{provider_label(call.provider)} runs inside AgentLoom: there is no endpoint to call.")
    return RequestCopy(json=body_json(body), curl=curl_command(endpoint, body) if endpoint else "",
                       curl_missing=missing)
