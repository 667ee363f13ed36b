"""CTX-24: estimators, their ids, the fallback, and the per-message cache."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from recordkit import image, text, tool_call_msg

import context.estimators as est
from context import BytesEstimator, EstimateCache, encoding_for_model, estimator_by_id, get_estimator

REPO = Path(__file__).resolve().parents[2]


def _sample() -> list[dict]:
    rng = random.Random(7)
    texts = ["Hello, world!", "日本語のテキストと絵文字 👨‍👩‍👧", "<|endoftext|> is just text here",
             json.dumps({"rows": list(range(200))}), "def f(x):\n    return x * 2\n" * 40,
             "".join(rng.choice("abcdefghij \n{}[]\":,0123456789") for _ in range(5000)),
             "Ünïcødé ßtraße ça va? " * 50, "\t\t\n\n  " * 30]
    messages = [{"role": "user", "content": t} for t in texts]
    messages.append({"role": "user", "content": [text("look"), image("data:image/png;base64," + "A" * 50_000)]})
    messages.append({"role": "assistant", "content": None,
                     "tool_calls": [tool_call_msg("call_1", "search", json.dumps({"q": "flights 日本"}))]})
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "x" * 3000})
    messages.append({"role": "assistant", "content": "ok", "reasoning_content": "thinking about it " * 20})
    return messages


TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search flights",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def test_ctx24_estimators_have_versioned_ids(o200k) -> None:
    assert BytesEstimator().id == "bytes-v1"
    assert o200k.id == "tiktoken-o200k_base-v1"
    assert estimator_by_id("bytes-v1").id == "bytes-v1"
    assert estimator_by_id("tiktoken-o200k_base-v1").id == "tiktoken-o200k_base-v1"
    assert estimator_by_id("dense-o200k-v1").id == "dense-o200k-v1"
    with pytest.raises(ValueError):
        estimator_by_id("bytes-v0")


@pytest.mark.parametrize("model, encoding", [
    ("gpt-4o", "o200k_base"), ("gpt-4o-mini-2024-07-18", "o200k_base"), ("gpt-4.1-nano", "o200k_base"),
    ("o1", "o200k_base"), ("o3-mini", "o200k_base"), ("o4-mini", "o200k_base"), ("gpt-5", "o200k_base"),
    ("gpt-5-mini", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"), ("deepseek-chat", None), ("llama3.1:8b", None), (None, None),
    ("omni-moderation-latest", None),
])
def test_ctx24_the_encoding_follows_the_openai_model_id(model, encoding) -> None:
    assert encoding_for_model(model) == encoding


def test_ctx24_bytes_v1_counts_utf8_json_plus_overheads_and_images_at_a_fixed_cost() -> None:
    message = {"role": "user", "content": "héllo"}
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    assert BytesEstimator().message(message) == len(body) + 16
    small = {"role": "user", "content": [text("hi"), image("data:x")]}
    huge = {"role": "user", "content": [text("hi"), image("data:" + "A" * 1_000_000)]}
    assert BytesEstimator().message(small) == BytesEstimator().message(huge)
    assert BytesEstimator().request([message], TOOLS) == 8 + len(body) + 16 + len(
        json.dumps(TOOLS[0], ensure_ascii=False, separators=(",", ":")).encode()) + 32


def test_ctx24_bytes_v1_never_counts_less_than_tiktoken(o200k) -> None:
    for message in _sample():
        assert BytesEstimator().message(message) >= o200k.message(message), message
    assert BytesEstimator().request(_sample(), TOOLS) >= o200k.request(_sample(), TOOLS)
    cl100k = est.tiktoken_estimator("cl100k_base")
    assert BytesEstimator().request(_sample(), TOOLS) >= cl100k.request(_sample(), TOOLS)


def test_ctx24_openai_models_get_their_own_tokenizer_and_every_other_model_the_dense_proxy(o200k) -> None:
    assert get_estimator("gpt-4o").id == "tiktoken-o200k_base-v1"
    assert get_estimator("gpt-4").id == "tiktoken-cl100k_base-v1"
    assert get_estimator("deepseek-chat", exact_tokenizer=False).id == "dense-o200k-v1"
    assert get_estimator("gpt-4", exact_tokenizer=False).id == "dense-o200k-v1"  # a proxy, not cl100k
    assert get_estimator("llama3.2:3b").id == "dense-o200k-v1"
    assert not est.estimate_is_exact("dense-o200k-v1", "llama3.2:3b", exact_tokenizer=True)
    assert est.estimate_is_exact("tiktoken-cl100k_base-v1", "gpt-4", exact_tokenizer=True)
    assert not est.estimate_is_exact("tiktoken-o200k_base-v1", "gpt-4o", exact_tokenizer=False)
    assert not est.estimate_is_exact("tiktoken-o200k_base-v1", "llama3.2:3b", exact_tokenizer=True)


def test_ctx24_the_vocabularies_ship_with_the_engine_and_load_offline_with_an_empty_cache(tmp_path) -> None:
    # An empty cache folder, and every download sent to a closed port: only the files in
    # context/vocab can make these counts exact.
    code = ("from context.estimators import get_estimator; e = get_estimator('gpt-4o'); c = get_estimator('gpt-4'); "
            "print(e.id, c.id, e.request([{'role': 'user', 'content': 'Hello, world'}]))")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "HTTPS_PROXY": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env,
                          timeout=120, check=True)
    assert done.stdout.split() == ["tiktoken-o200k_base-v1", "tiktoken-cl100k_base-v1", "11"], done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing downloaded, nothing written
    assert os.environ.get("TIKTOKEN_CACHE_DIR") != str(est.VOCAB_DIR)  # restored after the load


def test_ctx24_a_tiktoken_load_failure_falls_back_to_bytes_with_one_warning(monkeypatch, caplog) -> None:
    def broken(name: str):
        raise OSError("offline and no cache")

    monkeypatch.setattr(est, "_load_encoding", broken)
    monkeypatch.setattr(est, "_encodings", {})
    monkeypatch.setattr(est, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="context.estimators"):
        first = get_estimator("gpt-4o")
        second = get_estimator("gpt-4o-mini")
    assert first.id == second.id == "bytes-v1"
    assert len([r for r in caplog.records if "falling back to bytes-v1" in r.getMessage()]) == 1


@pytest.mark.parametrize("kind", ["bytes", "tiktoken"])
def test_ctx24_the_incremental_total_equals_a_full_recount(kind, o200k) -> None:
    estimator = BytesEstimator() if kind == "bytes" else o200k
    cache = EstimateCache(estimator)
    history: list[dict] = []
    for step, message in enumerate(_sample() * 3):
        history.append({**message, "step": step % 5})
        rebuilt = [dict(m) for m in history]  # a fresh projection each step: new dicts, same content
        assert cache.request(rebuilt, TOOLS) == estimator.request(rebuilt, TOOLS)
    assert cache.misses <= len(history)
    assert cache.hits > cache.misses


def test_ctx24_a_changed_message_is_re_estimated_not_served_stale() -> None:
    cache = EstimateCache(BytesEstimator())
    first = cache.message({"role": "user", "content": "short"})
    assert cache.message({"role": "user", "content": "a much longer text"}) > first
    assert cache.message({"role": "user", "content": [text("1")]}) != cache.message({"role": "user", "content": ["1"]})
    assert cache.message({"role": "user", "content": "x", "n": True}) == BytesEstimator().message(
        {"role": "user", "content": "x", "n": True})


def test_ctx24_a_message_edited_in_place_between_steps_is_re_estimated() -> None:
    estimator = BytesEstimator()
    cache = EstimateCache(estimator)
    messages = [{"role": "user", "content": "short"}, {"role": "tool", "tool_call_id": "c", "content": "x"}]
    assert cache.request(messages) == estimator.request(messages)
    messages[1]["content"] = "a much longer result than before"
    messages[0]["content"] += "!"
    assert cache.request(messages) == estimator.request(messages)
    assert cache.messages(messages) == [estimator.message(m) for m in messages]


def test_loop1_a_read_only_track_reuses_the_same_messages_unread_and_still_reads_new_or_equal_ones() -> None:
    compared = []

    class Watched(dict):  # a message that counts the times it is compared
        def __eq__(self, other):
            compared.append(self)
            return super().__eq__(other)

        __hash__ = None

    estimator = BytesEstimator()
    cache = EstimateCache(estimator)
    kept = [Watched(role="user", content="Count up.")]
    for step in range(40):  # a run's projection: the same objects, then one new message a step
        kept.append(Watched(role="tool", tool_call_id=f"c{step}", content="figure " * step))
        sent = [{"role": "system", "content": "S"}, *kept]  # the system text is a new dict each step
        assert cache.request(sent, TOOLS, track="body", read_only=True) == estimator.request(sent, TOOLS)
    # Per step only the new message is estimated, and the kept ones are not even compared.
    assert cache.misses == 2 + 40
    assert compared == []
    # A track that is not read-only still catches an edit in place; switching modes starts afresh.
    cache.messages(kept, track="body")
    kept[1]["content"] = "a much longer result than before"
    assert cache.messages(kept, track="body") == [estimator.message(m) for m in kept]


def test_ctx1_importing_the_engine_pulls_in_no_django_drf_celery_or_tiktoken() -> None:
    code = ("import sys, context; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('django', 'rest_framework', 'celery', 'tiktoken')); print(','.join(bad))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
