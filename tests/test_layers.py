"""The layers import only downwards (DESIGN.md section 5), read from the source with ``ast``:
every ``import`` and ``from ... import`` of ``arc_vllm`` modules, at module level or inside
functions alike (a lazy import is still a dependency).

- ``core`` and ``kv``'s pure modules import neither vLLM nor torch, nor any layer above them
  (``kv``'s connector, which vLLM loads, imports vLLM and the kernels, and nothing above);
- ``agent``, ``replay`` and ``evaluation`` (the agent side) never import ``serving``, and
  ``serving`` never imports them;
- ``agent`` does not import ``replay`` or ``evaluation``; ``replay`` does not import
  ``agent`` or ``evaluation``;
- no two modules import each other.

    pytest tests/test_layers.py
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "arc_vllm"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Each module of the package -> the modules it imports (``arc_vllm.*`` resolved to the
    module where one is named, and third-party top-level names as they are)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                # ``from arc_vllm.kv import claims``: the submodule is the dependency
                found.update(f"{node.module}.{alias.name}" for alias in node.names
                             if f"{node.module}.{alias.name}" in modules)
        graph[name] = found
    return graph


GRAPH = imports()


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "arc_vllm" else parts[0]


def offenders(source_layers: set[str], forbidden: set[str]) -> list[str]:
    return sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                  if layer(module) in source_layers for target in targets if layer(target) in forbidden)


KV_PURE = ("spans", "claims", "warmup", "extra_args", "config")


def test_core_and_kv_are_pure_python_below_everything():
    above = {"agent", "replay", "evaluation", "serving", "policies", "cost", "inspector", "cli",
             "reports"}
    engines = {"kernels", "vllm", "torch", "triton"}
    assert offenders({"core"}, above | engines | {"kv"}) == []
    assert offenders({"kv"}, above) == []
    pure = {f"arc_vllm.kv.{name}" for name in KV_PURE} | {"arc_vllm.kv"}
    assert sorted(f"{module} imports {target}" for module in pure for target in GRAPH[module]
                  if layer(target) in engines) == []


def test_the_agent_side_and_serving_never_import_each_other():
    agent_side = {"agent", "replay", "evaluation"}
    assert offenders(agent_side, {"serving"}) == []
    assert offenders({"serving"}, agent_side) == []


def test_agent_and_replay_sit_below_evaluation():
    assert offenders({"agent"}, {"replay", "evaluation"}) == []
    assert offenders({"replay"}, {"agent", "evaluation"}) == []
    assert offenders({"policies"}, {"agent", "replay", "evaluation", "serving"}) == []


def test_no_two_modules_import_each_other():
    pairs = sorted({tuple(sorted((module, target))) for module, targets in GRAPH.items()
                    for target in targets if target != module and module in GRAPH.get(target, ())})
    assert pairs == []


def test_the_scan_sees_imports():
    # A scan that found nothing would pass every test above.
    assert "arc_vllm.kv.spans" in GRAPH["arc_vllm.kv.claims"]
    assert "arc_vllm.agent.backends" in GRAPH["arc_vllm.evaluation.kv_reuse_bench"]
