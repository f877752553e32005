#!/usr/bin/env bash
# The prepared GPU check for the KV-cache kernels and the profiler, for a lent GPU machine that
# has torch and Triton but no vLLM, no network and no install of this project. In under 5
# minutes it runs the GPU tests (Triton and CUDA against the torch reference, and the KV-reuse
# connector's fill on the flash-attn paged layout with both kernels), the bandwidth
# benchmark, and `arc-vllm profile --engine torch` with Qwen3-8B's shapes (the roofline
# against measured decode steps, on the datasheet of the H200 or MI300X found by device name),
# and writes one JSON file: $OUT/gpu_check.json (OUT defaults to runs/gpu_check), with the
# profile's own files in $OUT/profile/.
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
ln -s "$PWD/arc_vllm/cost" "$PWD/arc_vllm/reports" "$shim/arc_vllm/"
export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_INTERPRET=0 ARC_VLLM_CACHE="${ARC_VLLM_CACHE:-$PWD/runs/cache}" PYTHONUNBUFFERED=1

nvidia-smi -L > "$OUT/nvidia-smi.txt" 2>&1
started=$(date +%s)
"$PYTHON" -m pytest -q -m gpu tests/test_kernels.py tests/test_kv_layout.py -p no:cacheprovider \
  --junitxml="$OUT/gpu_tests.xml" > "$OUT/gpu_tests.log" 2>&1
tests_rc=$?
"$PYTHON" bench/kernels.py --out "$OUT/bench.json" > "$OUT/bench.log" 2>&1
bench_rc=$?
timeout 150 "$PYTHON" -m arc_vllm.cost.profile --engine torch --model Qwen3-8B \
  --contexts 256,1024,2048,4096,8192 --batches 1,4,16 --steps 5 --out "$OUT/profile" \
  > "$OUT/profile.log" 2>&1
profile_rc=$?

"$PYTHON" - "$OUT" "$tests_rc" "$bench_rc" "$started" "$profile_rc" <<'PY'
import json, sys, time, xml.etree.ElementTree as ET
from pathlib import Path
out, tests_rc, bench_rc, started = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
profile_rc = int(sys.argv[5])
report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
          "device": (out / "nvidia-smi.txt").read_text().strip(),
          "seconds": int(time.time()) - started, "tests_exit_code": tests_rc,
          "bench_exit_code": bench_rc, "profile_exit_code": profile_rc}
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
try:
    profile = json.loads((out / "profile" / "profile.json").read_text())
    report["profile"] = {key: profile[key] for key in ("calibration", "hardware", "decode", "fit", "calibrated",
                                                        "targets", "traffic", "peak_memory_bytes")}
except Exception as error:
    report["profile"] = f"no profile: {error}"
report["logs_tail"] = {name: (out / name).read_text()[-3000:] for name in ("gpu_tests.log", "bench.log", "profile.log")
                       if (out / name).exists()}
(out / "gpu_check.json").write_text(json.dumps(report, indent=1))
print(json.dumps({k: v for k, v in report.items() if k not in ("bench", "logs_tail", "profile")}, indent=1))
PY
rm -rf "$shim"
exit $(( tests_rc != 0 || bench_rc != 0 || profile_rc != 0 ))
