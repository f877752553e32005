"""The set-up's promises: vLLM imports on this machine, the CUDA-only wheels are gone, the
embedded model is prepared and verified, and no console command is broken."""

import json
import subprocess
import sys
from pathlib import Path

from arc_vllm.model_prep import MANIFEST, default_model_dir, verify


def test_vllm_imports_without_cuda_wheels():
    code = ("import importlib.util, vllm; print(vllm.__version__); "
            "print([m for m in ('torchvision', 'torchaudio', 'torchcodec') "
            "if importlib.util.find_spec(m)])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    version, leftovers = done.stdout.strip().splitlines()[-2:]
    assert version.startswith("0.32") and leftovers == "[]"


def test_embedded_model_is_prepared_and_verified(tmp_path):
    folder = default_model_dir(require=True)
    assert verify(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["hidden_size"] == 576
    assert "quantization_config" not in config
    files = json.loads((folder / MANIFEST).read_text())["files"]
    assert "model.safetensors" in files and "tokenizer.json" in files


def test_a_damaged_model_folder_does_not_verify(tmp_path):
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(default_model_dir(require=True), copy)
    with open(copy / "tokenizer.json", "r+b") as handle:
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(bytes([byte[0] ^ 1]))
    assert not verify(copy)


def test_console_script_runs():
    done = subprocess.run([str(Path(sys.executable).parent / "arc-vllm"), "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "replay" in done.stdout
