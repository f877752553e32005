"""Print the relocate_kv implementations available on this machine."""

from arc_vllm.kernels import available_implementations

print(", ".join(available_implementations()))
