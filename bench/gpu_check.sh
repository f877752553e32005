#!/usr/bin/env bash
# The prepared GPU check for the KV-cache kernels, for a lent GPU machine that has torch and
# Triton but no vLLM, no network and no install of this project. In under 5 minutes it runs
# the GPU tests (Triton and CUDA against the torch reference) and the bandwidth benchmark,
# and writes one JSON file: $OUT/gpu_check.json (OUT defaults to runs/gpu_check).
#
#   bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/gpu_check}"
mkdir -p "$OUT"
PYTHON="${PYTHON:-python3}"

# arc_vllm.kernels without installing: a throw-away package folder that links the pieces.
shim="$(mktemp -d)"
mkdir -p "$shim/arc_vllm"
ln -s "$PWD/arc_vllm/__init__.py" "$PWD/arc_vllm/paths.py" "$shim/arc_vllm/"
ln -s "$PWD/kernels" "$shim/arc_vllm/kernels"
export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_INTERPRET=0 ARC_VLLM_CACHE="${ARC_VLLM_CACHE:-$PWD/runs/cache}" PYTHONUNBUFFERED=1

nvidia-smi -L > "$OUT/nvidia-smi.txt" 2>&1
started=$(date +%s)
"$PYTHON" -m pytest -q -m gpu tests/test_kernels.py -p no:cacheprovider \
  --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1
tests_rc=$?
"$PYTHON" bench/kernels.py --out "$OUT/bench.json" > "$OUT/bench.log" 2>&1
bench_rc=$?

"$PYTHON" - "$OUT" "$tests_rc" "$bench_rc" "$started" <<'PY'
import json, sys, time, xml.etree.ElementTree as ET
from pathlib import Path
out, tests_rc, bench_rc, started = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
          "device": (out / "nvidia-smi.txt").read_text().strip(),
          "seconds": int(time.time()) - started, "tests_exit_code": tests_rc,
          "bench_exit_code": bench_rc}
try:
    suite = ET.parse(out / "gpu_tests.xml").getroot().find("testsuite")
    report["tests"] = {key: int(suite.get(key)) for key in ("tests", "failures", "errors", "skipped")}
    report["test_failures"] = [
        {"test": case.get("name"), "message": (problem.get("message") or "")[:500]}
        for case in suite.iter("testcase") for problem in list(case)
        if problem.tag in ("failure", "error")]
except Exception as error:
    report["tests"] = f"no junit report: {error}"
try:
    report["bench"] = json.loads((out / "bench.json").read_text())
except Exception as error:
    report["bench"] = f"no benchmark: {error}"
report["logs_tail"] = {name: (out / name).read_text()[-3000:] for name in ("gpu_tests.log", "bench.log")
                       if (out / name).exists()}
(out / "gpu_check.json").write_text(json.dumps(report, indent=1))
print(json.dumps({k: v for k, v in report.items() if k not in ("bench", "logs_tail")}, indent=1))
PY
rm -rf "$shim"
exit $(( tests_rc != 0 || bench_rc != 0 ))
