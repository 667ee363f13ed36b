"""The shell every HTTP chat client shares: one guarded connection, one way to read answers.

:class:`GuardedChatClient` holds the guarded ``httpx`` client (``http.build_client``: no
proxies, no redirects, pinned addresses), the time and size limits, and the API key —
kept out of ``repr`` and every error. A subclass says where it posts, with which headers
and how one SSE message of its provider reads; :meth:`GuardedChatClient._post_stream`
and :meth:`GuardedChatClient._post_json` do the rest the same way for every provider
(LOOP-3, CTX-6):

* a non-2xx answer raises the error its status and body classify (body never echoed);
* a fault before any content raises (so ``call_with_retries`` can retry it);
* a fault after content ends the iteration with ``StreamEnd(cut=True, error=...)`` so the
  partial answer is kept, and so does a stream that stops before the provider said it
  was complete -- ``[DONE]`` or a clean close with no finish reason is a cut
  (``stream_cut``), never a complete answer;
* a server that answers JSON to a streamed request is read as one answer;
* a 200 whose stream ends before its first data event — an empty body, or only comments
  (``: ping``) and then a close, clean or cut — goes to the client's ``unstreamed`` when it
  has one: the same request once more without streaming, to learn why before it counts as
  a provider fault, on a connection of its own (the server may be closing the pooled
  one). llama.cpp's server answers a streamed prompt over its window with an
  empty 200, llama-cpp-python's with a ping and a cut connection; asked plainly, both say
  it is too long, with the figures the loop learns the window from (CAT-3).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self

import httpx

from context.surrogates import json_loads_clean, replace_lone_surrogates
from models_catalog.errors import ProviderError, ProviderUnavailableError, StreamCutError, error_from_status
from models_catalog.http import (
    CHAT_LIMITS,
    HttpLimits,
    Resolver,
    build_client,
    read_error_body,
    read_limited,
    transport_error,
)
from models_catalog.private_hosts import AllowPrivate
from models_catalog.providers.events import ChatEvent, ChatStream, StreamEnd
from models_catalog.providers.streaming import SSEMessage, iter_sse

JsonEvents = Callable[[Any], list[ChatEvent]]



# A server that refuses a streamed prompt this way (llama-cpp-python over its window) closes
# within moments of its 200. A stream silent for longer was a model at work whose connection
# then dropped: asking that again without streaming would hold the whole answer until it is
# written, so it is retried as a stream like any dropped connection.
SILENT_REFUSAL_SECONDS = 10.0


def _refused_at_once(opened_at: float) -> bool:
    return time.monotonic() - opened_at <= SILENT_REFUSAL_SECONDS

class Assembler(Protocol):
    """What the read loop needs from a provider's stream assembler."""

    emitted: bool

    def finish(self, *, cut: bool, error: ProviderError | None = None) -> StreamEnd: ...


def raise_for_status(response: httpx.Response, *, provider_label: str) -> None:
    """Raise the classified error of a non-2xx answer (its body read only to classify)."""
    if not 200 <= response.status_code < 300:
        raise error_from_status(response.status_code, headers=response.headers, body=read_error_body(response),
                                provider_label=provider_label)


def parse_json(raw: bytes, *, provider_label: str) -> Any:
    try:
        return json_loads_clean(raw)
    except ValueError:
        raise ProviderUnavailableError(f"{provider_label} sent an answer that is not valid JSON.") from None


def body_bytes(body: Mapping[str, Any]) -> bytes:
    """The bytes of a request body as every chat client sends them: compact JSON, UTF-8,
    keys in the body's order. The context inspector rebuilds a call's body and gets these
    same bytes from it (``sessions.selectors.model_call_body``).

    A lone surrogate cannot be sent (not UTF-8): every entry of text replaces them, and
    so does reading what is stored; one that got past all of them is replaced here rather
    than failing this and every later question of the session. The text is rewritten only
    then: the common body is encoded once, as before."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return replace_lone_surrogates(text).encode("utf-8")


def _json_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {**headers, "Content-Type": "application/json"}


class GuardedChatClient:
    """Base of the HTTP chat clients; use them as context managers."""

    label = "The model provider"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        allow_private: AllowPrivate = False,
        limits: HttpLimits | None = None,
        transport: httpx.BaseTransport | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.__api_key = api_key  # name-mangled: never printed, only read by _key()
        self._limits = limits or CHAT_LIMITS
        self._client = build_client(allow_private=allow_private, limits=self._limits,
                                    transport=transport, resolver=resolver)
        # A client of its own for a question that must not ride a pooled connection (see
        # ``_post_json``'s ``fresh``); a transport given by the caller is its own pool.
        self._fresh_client: Callable[[], httpx.Client] | None = None if transport is not None else (
            lambda: build_client(allow_private=allow_private, limits=self._limits, resolver=resolver))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _key(self) -> str | None:
        return self.__api_key

    def _post_json(self, url: str, body: dict[str, Any], *, headers: Mapping[str, str],
                   json_events: JsonEvents, fresh: bool = False) -> ChatStream:
        """One plain JSON request and its answer as events.

        ``fresh``: on a new connection, closed after it, not on one of the pool. The
        unstreamed question after a silent 200 uses it: llama-cpp-python's server ends a
        refused stream with a clean, empty body on a keep-alive connection and closes that
        connection a few milliseconds later, so a question sent on it is reset and the 400
        that names the window is never read (issue #45: a refusal retried as an outage)."""
        deadline = time.monotonic() + self._limits.total_timeout
        own = self._fresh_client() if fresh and self._fresh_client is not None else None
        client = own or self._client
        try:
            with client.stream("POST", url, headers=_json_headers(headers), content=body_bytes(body)) as response:
                raise_for_status(response, provider_label=self.label)
                raw = read_limited(response, max_bytes=self._limits.max_response_bytes, deadline=deadline)
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider_label=self.label) from exc
        finally:
            if own is not None:
                own.close()
        yield from json_events(parse_json(raw, provider_label=self.label))

    def _post_stream(
        self,
        url: str,
        body: dict[str, Any],
        *,
        headers: Mapping[str, str],
        assembler: Assembler,
        read: Callable[[SSEMessage], tuple[list[ChatEvent], bool]],
        ended: Callable[[], bool],
        json_events: JsonEvents,
        unstreamed: Callable[[], ChatStream] | None = None,
    ) -> ChatStream:
        """A streamed request. ``read`` turns one SSE message into events and says whether
        it was the last; ``ended`` says whether the provider declared the answer complete
        (for a stream that closes without its last message); ``unstreamed`` asks the same
        request without streaming, for a 200 that ended before its first data event (None:
        that is a cut answer like any other)."""
        label, limits = self.label, self._limits
        deadline = time.monotonic() + limits.total_timeout
        done = False
        opened = False  # a 2xx answer began: what follows is its body
        opened_at = 0.0
        messages = 0  # data events read; comments and keep-alives are not events

        try:
            with self._client.stream("POST", url, headers=_json_headers(headers), content=body_bytes(body)) as response:
                raise_for_status(response, provider_label=label)
                opened, opened_at = True, time.monotonic()
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    # The server ignored "stream": read it as one JSON answer.
                    raw = read_limited(response, max_bytes=limits.max_response_bytes, deadline=deadline)
                    if raw.strip():
                        yield from json_events(parse_json(raw, provider_label=label))
                        return
                else:
                    for message in iter_sse(response.iter_bytes(), max_bytes=limits.max_response_bytes,
                                            deadline=deadline, provider_label=label):
                        messages += 1
                        events, done = read(message)
                        yield from events
                        if done:
                            break
        except ProviderError as err:
            if not assembler.emitted:
                raise
            yield assembler.finish(cut=True, error=err)
            return
        except httpx.HTTPError as exc:
            fault = transport_error(exc, provider_label=label)
            if assembler.emitted:
                yield assembler.finish(cut=True, error=fault)
                return
            # A connection closed before the first data event is the same silence as an
            # empty body (a time-out is not: asking again would only wait again).
            closed = isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError))
            if unstreamed is None or not opened or messages or not closed or not _refused_at_once(opened_at):
                raise fault from exc
        if unstreamed is not None and opened and messages == 0 and not assembler.emitted:
            yield from unstreamed()
            return
        if not ended():
            # ``[DONE]`` or a clean close without a finish reason: the server ended the answer
            # before it was complete (llama-cpp-python's does so when another request waits).
            # A cut, asked again -- never a complete, empty answer.
            cut_error = StreamCutError(f"{label} ended its answer before it was complete.")
            if not assembler.emitted:
                raise cut_error
            yield assembler.finish(cut=True, error=cut_error)
            return
        yield assembler.finish(cut=False)
