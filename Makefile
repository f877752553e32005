# The two commands of the README. Both set up first (idempotent: quick on a second run).
#   make run    set up, then serve the embedded default model with ARC on 127.0.0.1:8000
#   make test   set up, then run the whole test suite (slow tests included)
# Also: make replay (the sample trajectories through ARC), make bench (core benchmarks).
export HF_HUB_OFFLINE := 1
export VLLM_NO_USAGE_STATS := 1
export DO_NOT_TRACK := 1
export RAY_USAGE_STATS_ENABLED := 0
export TOKENIZERS_PARALLELISM := false
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup run replay test bench

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/arc-vllm serve --port 8000 --enforce-eager

replay: setup
	.venv/bin/arc-vllm replay examples/trajectories.jsonl --context-window 4096 --max-tokens 512 --out runs/replay

test: setup
	.venv/bin/python -m pytest -q

bench: setup
	.venv/bin/python bench/core.py
