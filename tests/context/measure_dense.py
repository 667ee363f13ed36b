"""Measure the dense samples with the real tokenizers and write ``data/dense_counts.json``.

    .venv/bin/python tests/context/measure_dense.py

The suite checks the estimator against the committed file, so it runs without the
tokenizers; ``test_ctx24_dense.py::test_ctx24_committed_counts_are_the_real_tokenizers``
(marked ``tokenizers``) recounts every sample when they are installed and fails if a
count differs. How to install them: ``real_tokenizers.py``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "dense_counts.json"


def measure() -> dict[str, object]:
    sys.path.insert(0, str(HERE))
    import real_tokenizers
    from dense_samples import dense_samples

    loaded, missing = real_tokenizers.available()
    if missing:
        raise SystemExit(f"every tokenizer is needed for the committed file; missing: {missing}")
    samples = [{"class": kind, "text": text, "chars": len(text),
                "counts": {name: count(text) for name, count in loaded.items()}}
               for kind, text in dense_samples()]
    return {
        "how": ("Counts of text alone (no BOS, no chat template) by each tokenizer, loaded from files that "
                "packages on the package index ship: tests/context/real_tokenizers.py; samples from "
                "tests/context/dense_samples.py; written by tests/context/measure_dense.py."),
        "tokenizers": sorted(loaded),
        "samples": samples,
    }


if __name__ == "__main__":
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(measure(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {DATA}")
