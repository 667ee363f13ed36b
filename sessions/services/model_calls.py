"""The inspector's log of model calls, in O(new): what each call sent, exactly, by reference.

A call's body is stored as its fields in order, with every message, the system text and
the tool schemas as ``SentBlob`` ids — each distinct piece stored once per session,
encrypted — and the list of message ids as a delta of the previous call of the same
instance and purpose (``base``, ``keep`` of its ids, then ``add``). A step that appends
two messages stores two blobs and a few ids, however long the session; reading a call
back (``sessions.selectors.model_call_body``) rebuilds the body byte for byte. Every
``FULL_EVERY`` calls a call keeps its whole list (``root``), so a read walks a bounded
chain.

A row is opened before the call is sent (it exists even if the worker dies mid-answer)
and closed with its outcome and the provider's usage, stored next to our estimate for
calibration (CTX-25).
"""
from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from context.kept import equal_until, same_until
from context.surrogates import replace_lone_surrogates
from core.db_rows import rows_insert
from sessions.models import Instance, ModelCall, Run, SentBlob, Session

FULL_EVERY = 32
REQUEST_FORMAT = 2
# Body fields stored as blobs rather than inline: large, and the same from call to call.
BLOB_FIELDS = ("system", "tools")


def _canonical(content: Any) -> bytes:
    # Key order is kept: the same message written with its keys in another order was
    # another request, byte for byte.
    text = json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # replaced as the request body itself is (chat_http.body_bytes)
        return replace_lone_surrogates(text).encode()


def blob_digest(content: Any) -> str:
    """A keyed hash of a piece of a request: finds an identical piece without decrypting."""
    key = hashlib.sha256(b"agentloom-sent-blob:" + settings.ENCRYPTION_KEY.encode()).digest()
    return hmac.new(key, _canonical(content), hashlib.sha256).hexdigest()


@dataclass
class CallChain:
    """What the last call logged for one instance and purpose sent, so the next call
    stores only its difference (kept in memory by the run that makes the calls)."""

    call_id: int | None = None
    root_id: int | None = None
    length: int = 0
    messages: list[Any] = field(default_factory=list)
    refs: list[int] = field(default_factory=list)
    estimates: list[int | None] = field(default_factory=list)
    named: dict[str, tuple[Any, int]] = field(default_factory=dict)  # system, tools: (content, blob id)

    def advance(self, prepared: PreparedCall) -> None:
        """The prepared call was saved: the next one is a delta of it."""
        self.call_id = prepared.call.pk
        self.root_id = self.root_id if prepared.delta else prepared.call.pk
        self.length = self.length + 1 if prepared.delta else 1
        self.messages, self.refs, self.estimates = prepared.messages, prepared.refs, prepared.estimates
        self.named = prepared.named


def in_chunks(items: Sequence[Any], fields: Sequence[str]) -> list[Sequence[Any]]:
    """``items`` cut to what one statement may carry with ``fields`` parameters each: the
    database's bound on a statement's parameters, as Django's own batches keep it
    (65,535 on PostgreSQL with server-side binding, core/db/postgresql; 999 on SQLite)."""
    size = max(1, connection.ops.bulk_batch_size(list(fields), items))
    return [items[start:start + size] for start in range(0, len(items), size)]


def blobs_store(*, session_id: int, pieces: Sequence[Any], seen_before: bool = False) -> list[int]:
    """The blob id of each piece, storing the pieces the session does not have yet.

    One statement in the usual case: an INSERT that skips pieces already stored and
    returns the ids of the ones it stored; only pieces seen before are then read back.
    (A request of more distinct pieces than one statement may carry takes one per chunk.)

    ``seen_before``: most pieces are likely stored already — a run's first call sends the
    session's history, which earlier runs logged. They are then looked up first and only
    the others encrypted and inserted: encrypting every piece of a long session for an
    INSERT that skipped nearly all of them grew each question's cost with the session
    (issue #29). Two statements still, the lookup and the INSERT of what is new.
    """
    digests = [blob_digest(piece) for piece in pieces]
    unique: dict[str, Any] = {}
    for digest, piece in zip(digests, pieces):
        unique.setdefault(digest, piece)
    if not unique:
        return []
    known: dict[str, int] = _blobs_known(session_id, list(unique)) if seen_before else {}
    content = SentBlob._meta.get_field("content")
    created = SentBlob._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    for chunk in in_chunks([(d, p) for d, p in unique.items() if d not in known],
                           ["session_id", "digest", "content", "created_at"]):
        params: list[Any] = []
        for digest, piece in chunk:
            params += [session_id, digest, content.get_db_prep_value(piece, connection), created]
        with connection.cursor() as cursor:
            cursor.execute(
                f'INSERT INTO "{SentBlob._meta.db_table}" ("session_id", "digest", "content", "created_at") '
                f'VALUES {", ".join(["(%s, %s, %s, %s)"] * len(chunk))} '
                f'ON CONFLICT ("session_id", "digest") DO NOTHING RETURNING "digest", "id"', params)
            known.update(cursor.fetchall())
    # Stored before (or, after a lookup, by another call of the session meanwhile): read back.
    known.update(_blobs_known(session_id, [digest for digest in unique if digest not in known]))
    return [known[digest] for digest in digests]


def _blobs_known(session_id: int, digests: list[str]) -> dict[str, int]:
    """The ids of the session's blobs among ``digests``, written out (one statement a chunk)."""
    known: dict[str, int] = {}
    for chunk in in_chunks(digests, ["session_id", "digest"]):
        with connection.cursor() as cursor:
            cursor.execute(f'SELECT "digest", "id" FROM "{SentBlob._meta.db_table}" WHERE "session_id" = %s '
                           f'AND "digest" IN ({", ".join(["%s"] * len(chunk))})', [session_id, *chunk])
            known.update(cursor.fetchall())
    return known


def _refs(session_id: int, chain: CallChain, messages: Sequence[Any],
          named: dict[str, Any]) -> tuple[list[int], dict[str, tuple[Any, int]]]:
    """Blob ids of ``messages`` and of the named pieces (system, tools). What equals the
    previous call's piece at the same place is reused by comparing content (C-level,
    short-circuits on strings shared with the records) — or by identity: the builders
    hand the same, never-changed message objects to successive bodies (LOOP-1), and
    Python's containers treat identity as equality too. Only the rest is hashed and
    stored, all in one write."""
    refs: list[int] = []
    fresh: list[Any] = []
    missing: list[int] = []  # the places of ``fresh`` in ``refs``
    known = len(chain.messages)
    position = 0
    while position < len(messages):
        same = same_until(messages, chain.messages, position)  # C speed over what is kept (issue #46)
        if same > position:
            refs += chain.refs[position:same]
            position = same
            continue
        message = messages[position]
        if position < known and message == chain.messages[position]:
            refs.append(chain.refs[position])
        else:
            missing.append(len(refs))
            refs.append(0)
            fresh.append(message)
        position += 1
    kept = {name: chain.named[name] for name, value in named.items()
            if name in chain.named and chain.named[name][0] == value}
    new_names = [name for name in named if name not in kept]
    stored = blobs_store(session_id=session_id, pieces=[*fresh, *(named[n] for n in new_names)],
                         seen_before=known == 0)  # a first call: the session's history, logged before
    for place, ref in zip(missing, stored):  # only the new places: no Python step per message kept
        refs[place] = ref
    for name, ref in zip(new_names, stored[len(missing):]):
        kept[name] = (named[name], ref)
    return refs, kept


@dataclass
class PreparedCall:
    """A call log ready to save (``call`` is unsaved): saved by the caller in its own
    transaction — with the step, for an action call — then ``CallChain.advance``."""

    call: ModelCall
    messages: list[Any]
    refs: list[int]
    estimates: list[int | None]
    delta: bool
    named: dict[str, tuple[Any, int]] = field(default_factory=dict)


def model_call_prepare(*, run: Run, instance: Instance, purpose: str, provider: str, model: str,
                       estimator_id: str, estimated_tokens: int, body: dict[str, Any], estimates: Sequence[int] = (),
                       chain: CallChain | None = None, outcome: str = "", usage: dict[str, Any] | None = None,
                       finished: bool = False, repairs: Sequence[dict[str, Any]] = (),
                       output: dict[str, Any] | None = None,
                       estimated_output_tokens: int | None = None) -> PreparedCall:
    """The log of one call: ``body`` is exactly what the client sent. Stores the pieces
    of it the session did not have yet; the row itself is left for the caller to save.
    ``chain`` (one per instance and purpose) makes the log a delta of the previous call;
    ``repairs`` are what the projector changed to make this request valid (the
    inspector shows them with their reasons); ``output`` is what the call answered,
    already redacted, and ``estimated_output_tokens`` our estimate of it."""
    chain = chain if chain is not None else CallChain()
    messages = list(body.get("messages") or [])
    refs, named = _refs(run.session_id, chain, messages, {name: body[name] for name in BLOB_FIELDS if name in body})
    per_message = [*estimates, *([None] * (len(messages) - len(estimates)))][:len(messages)]
    blobs = {name: blob for name, (_, blob) in named.items()}
    delta = chain.call_id is not None and chain.length < FULL_EVERY
    keep = min(equal_until(chain.refs, refs), equal_until(chain.estimates, per_message)) if delta else 0
    request = {
        "v": REQUEST_FORMAT, "order": list(body),
        "fields": {k: v for k, v in body.items() if k != "messages" and k not in BLOB_FIELDS}, "blobs": blobs,
        "base": chain.call_id if delta else None, "root": chain.root_id if delta else None, "keep": keep,
        "add": refs[keep:], "estimates": per_message[keep:],
    }
    if repairs:
        request["repairs"] = list(repairs)
    if output is not None:
        request["output"] = output
    now = timezone.now()
    call = ModelCall(run=run, instance=instance, purpose=purpose, provider=provider, model=model,
                     estimator_id=estimator_id, estimated_tokens=estimated_tokens, request=request, outcome=outcome,
                     usage=usage, estimated_output_tokens=estimated_output_tokens, created_at=now,
                     finished_at=now if finished else None)
    return PreparedCall(call=call, messages=messages, refs=refs, estimates=per_message, delta=delta, named=named)


def session_action_model_note(*, session_id: int, provider: str, model: str, other_models: bool = False) -> None:
    """The session's action calls go to this model too (``Session.action_model``): called
    before a run's first action call when its traits say the session has not noted it;
    ``other_models`` is what they said of its earlier calls (a session that noted none may
    have calls of a worker from before the column, see ``session_traits``).

    Noted before the call is sent, so no logged call goes unnoted; if the call is then never
    made, a later run of another model may drop thinking it could have kept — the safe
    side of CTX-11."""
    key = Session.action_model_key(provider, model)
    with connection.cursor() as cursor:
        cursor.execute(f'UPDATE "{Session._meta.db_table}" SET "action_model" = CASE WHEN "action_model" IN (%s, %s) '
                       'AND NOT %s THEN %s ELSE %s END WHERE "id" = %s',
                       ["", key, other_models, key, Session.MIXED_MODELS, session_id])


def model_call_open(*, chain: CallChain | None = None, **fields: Any) -> ModelCall:
    """Log a call about to be sent (the row exists even if the worker dies mid-answer)."""
    chain = chain if chain is not None else CallChain()
    prepared = model_call_prepare(chain=chain, **fields)
    rows_insert([prepared.call])
    chain.advance(prepared)
    return prepared.call


def model_call_close(*, call: ModelCall, outcome: str, usage: dict[str, Any] | None = None,
                     output: dict[str, Any] | None = None, estimated_output_tokens: int | None = None) -> None:
    """Record how the call ended (``ok``, ``cancelled`` or an error code), the provider's
    usage and, when it answered, the answer (already redacted) and our estimate of it."""
    fields: dict[str, Any] = {"outcome": outcome, "usage": usage, "estimated_output_tokens": estimated_output_tokens}
    if output is not None:
        call.request = {**call.request, "output": output}
        fields["request"] = call.request
    ModelCall.objects.filter(pk=call.pk).update(**fields, finished_at=timezone.now())
    call.outcome, call.usage, call.estimated_output_tokens = outcome, usage, estimated_output_tokens
