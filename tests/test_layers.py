"""The layers import only downwards (the rules are listed in docs/layout.md), read from the
source with ``ast``: every ``import`` and ``from ... import``,
absolute and relative, at module level or inside functions alike (a lazy import is still a
dependency), of every module under ``arc_vllm/`` and ``kernels/`` (installed as
``arc_vllm.kernels``). Every module has a layer:

    base        the leaves: paths, offline, console, model_prep, reasoning_model, ray_cluster, vllm_compat (stdlib
                at import; model_prep converts with torch, ray_cluster starts Ray, vllm_compat
                reads vLLM, all lazily)
    core        pure Python: no vLLM, no torch; core and base only
    kernels     torch, Triton, CUDA: no arc_vllm layer but kernels and base
    kv          core, kernels and base (its pure modules import no engine at all)
    policies    core and base
    agent, replay, evaluation   the agent side; never serving, nor serving them
    cost, reports   measurement and analysis: cost, reports and base only (the agent side reads them)
    serving, inspector, cli   the top

and inside ``serving/``, its rooms (each package's docstring says what it owns):

    errors, metrics, processes, options   the leaves: importable from every room, importing none
    sessions      a session, the manager and its storage, conversation keys and index,
                  ownership, locks
    compaction    the clients' compaction turns, handles, the asks: + sessions
    step          one request through ARC (the step, its stream, the engine, the record, the
                  stream filter, ARC's tools, the KV warm-up): + compaction, sessions
    apis          the adapters: + step, compaction, sessions
    the rest      the plugin, launcher, routes, the ARC route, the inspector's routes, the Ray
                  front and replica (``ray/``), the scheduler hook, ``local``: anything

- no two modules import each other;
- no test module imports another (shared code lives in ``tests/helpers/``);
- no module under ``tests/helpers/`` or ``scripts/`` is named like a standard-library module
  (a helper run as a script puts its folder first on ``sys.path``: ``helpers/http.py`` broke
  ``urllib.request`` in the CLI round trip).

    pytest tests/test_layers.py
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "arc_vllm"
TESTS = ROOT / "tests"
BASE = {"paths", "offline", "console", "model_prep", "reasoning_model", "ray_cluster", "vllm_compat"}
LAYERS = {"base", "core", "kernels", "kv", "policies", "agent", "replay", "evaluation", "serving",
          "inspector", "cost", "reports", "cli", "templates"}
ENGINES = {"vllm", "torch", "triton"}


def module_names() -> dict[str, Path]:
    """Every module's dotted name (as installed) -> its file."""
    modules = {}
    for base, prefix in ((PACKAGE, "arc_vllm"), (ROOT / "kernels", "arc_vllm.kernels")):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([prefix, *parts])] = path
    return modules


MODULES = module_names()


def imports_of(name: str, path: Path, known) -> set[str]:
    """The modules ``name`` imports: ``arc_vllm.*`` resolved to the module named (relative
    imports too), third-party ones as their top-level name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x, from ..y import z
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from arc_vllm.kv import claims``: the submodule is the dependency, not the package
            submodules = {f"{target}.{alias.name}" for alias in node.names} & set(known)
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
    return {module for module in found if module}


GRAPH = {name: imports_of(name, path, MODULES) for name, path in MODULES.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "arc_vllm":
        return parts[0]  # a third-party package, by its top-level name
    if len(parts) == 1:
        return "base"  # arc_vllm/__init__.py
    return "base" if parts[1] in BASE else parts[1]


def offenders(source_layers: set[str], allowed: set[str]) -> list[str]:
    """Imports of ``arc_vllm`` modules from ``source_layers`` into any layer not ``allowed``."""
    return sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                  if layer(module) in source_layers for target in targets
                  if target.startswith("arc_vllm") and layer(target) not in allowed)


def test_every_module_has_a_layer():
    assert {layer(module) for module in MODULES} <= LAYERS
    assert "arc_vllm.kernels.relocate_kv" in MODULES and "arc_vllm.offline" in MODULES


def test_the_leaves_and_core_stand_on_nothing_above():
    assert offenders({"base"}, {"base"}) == []
    assert offenders({"core"}, {"core", "base"}) == []
    assert sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                  if layer(module) == "core" for target in targets if layer(target) in ENGINES) == []


KV_PURE = ("spans", "claims", "warmup", "extra_args", "config")


def test_kernels_and_kv_sit_on_core_and_each_other_only():
    assert offenders({"kernels"}, {"kernels", "base"}) == []
    assert offenders({"kv"}, {"kv", "kernels", "core", "base"}) == []
    pure = {f"arc_vllm.kv.{name}" for name in KV_PURE} | {"arc_vllm.kv"}
    assert sorted(f"{module} imports {target}" for module in pure for target in GRAPH[module]
                  if layer(target) in ENGINES | {"kernels"}) == []


def test_cost_and_reports_stand_on_each_other_and_the_leaves_only():
    """Measurement and analysis (the roofline, the profiler, statistics, the paper's tables)
    sit below the agent side, which reads them, and import nothing of it, of serving or of
    the top."""
    assert offenders({"cost", "reports"}, {"cost", "reports", "base"}) == []


def test_the_agent_side_and_serving_never_import_each_other():
    agent_side = {"agent", "replay", "evaluation"}
    assert offenders(agent_side, LAYERS - {"serving", "cli"}) == []
    assert offenders({"serving"}, LAYERS - agent_side - {"cli"}) == []


SERVING_LEAVES = {"errors", "metrics", "processes", "options"}
SERVING_ROOMS = ("sessions", "compaction", "step", "apis")  # each may import those before it


def serving_room(module: str) -> int | None:
    """A serving module's rank: its room's index in ``SERVING_ROOMS``, the top after them,
    None for a leaf (and for anything outside serving)."""
    parts = module.split(".")
    if parts[:2] != ["arc_vllm", "serving"] or len(parts) < 3 or parts[2] in SERVING_LEAVES:
        return None
    return SERVING_ROOMS.index(parts[2]) if parts[2] in SERVING_ROOMS else len(SERVING_ROOMS)


def test_serving_rooms_import_only_rooms_below_and_the_leaves():
    wrong = sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                   if serving_room(module) is not None for target in targets
                   if serving_room(target) is not None and serving_room(target) > serving_room(module))
    assert wrong == []
    leaves = sorted(f"{module} imports {target}" for module, targets in GRAPH.items()
                    if module.split(".")[:2] == ["arc_vllm", "serving"] and len(module.split(".")) == 3
                    and module.split(".")[2] in SERVING_LEAVES
                    for target in targets if target.startswith("arc_vllm.serving"))
    assert leaves == []
    # Every room is a package with a docstring that says what it owns and may import.
    for room in SERVING_ROOMS:
        doc = ast.get_docstring(ast.parse((PACKAGE / "serving" / room / "__init__.py").read_text()))
        assert doc and "may import" in doc.lower(), room


def test_policies_agent_and_replay_sit_below_evaluation():
    assert offenders({"policies"}, {"policies", "core", "base"}) == []
    assert offenders({"agent"}, LAYERS - {"replay", "evaluation", "serving", "cli"}) == []
    assert offenders({"replay"}, LAYERS - {"agent", "evaluation", "serving", "cli"}) == []


def test_no_two_modules_import_each_other():
    pairs = sorted({tuple(sorted((module, target))) for module, targets in GRAPH.items()
                    for target in targets if target != module and module in GRAPH.get(target, ())})
    assert pairs == []


def test_no_test_module_imports_another():
    tests = {path.stem for path in TESTS.glob("test_*.py")}
    found = sorted(f"{path.name} imports {target}" for path in TESTS.glob("test_*.py")
                   for target in imports_of(f"tests.{path.stem}", path, {})
                   if target.split(".")[-1] in tests or target.removeprefix("tests.") in tests)
    assert found == []


def test_no_script_folder_shadows_the_standard_library():
    import sys

    shadows = sorted(f"{path.relative_to(ROOT)}" for folder in (TESTS / "helpers", ROOT / "scripts", ROOT / "bench")
                     for path in folder.glob("*.py") if path.stem in sys.stdlib_module_names)
    assert shadows == []


def test_the_scan_sees_imports():
    # A scan that found nothing would pass every test above.
    assert "arc_vllm.kv.spans" in GRAPH["arc_vllm.kv.claims"]
    assert "arc_vllm.agent.backends" in GRAPH["arc_vllm.evaluation.kv_reuse_bench"]
    assert "arc_vllm.kernels.rope" in GRAPH["arc_vllm.kernels.cpu_layout"]
    assert "arc_vllm.model_prep" in GRAPH["arc_vllm.core.tokens"] and layer("arc_vllm.model_prep") == "base"



def test_relative_imports_are_resolved(tmp_path):
    source = tmp_path / "stream.py"
    source.write_text("from ...core import tokens\nfrom . import chat\nfrom ..apis.chat import ChatAPI\n")
    known = {"arc_vllm.core.tokens", "arc_vllm.serving.step.chat"}
    expected = {"arc_vllm.core.tokens", "arc_vllm.serving.step.chat", "arc_vllm.serving.apis.chat"}
    assert imports_of("arc_vllm.serving.step.stream", source, known) == expected
    assert expected <= set(GRAPH)  # modules that exist


def test_every_package_folder_is_installed():
    # pyproject lists its packages (kernels/ and csrc/ are mapped into arc_vllm from the top of
    # the repository, which setuptools' package finder cannot combine with a mapping): a new
    # room left out of the list would import in the checkout and be missing from the wheel.
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(path.relative_to(ROOT).parts) for path in (ROOT / "arc_vllm").rglob("*")
               if path.is_dir() and path.name != "__pycache__"}
    folders |= {"arc_vllm", "arc_vllm.kernels", "arc_vllm.kernels.csrc"}
    assert listed == folders


def test_every_serving_error_lives_in_the_error_module():
    # One owner: an exception class defined anywhere else in serving/ would be a status with no
    # entry in ErrorForms.
    elsewhere = sorted(f"{path.relative_to(ROOT)}:{node.name}" for path in (ROOT / "arc_vllm" / "serving").rglob("*.py")
                       if path.name != "errors.py"
                       for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)
                       and any(getattr(base, "id", getattr(base, "attr", "")).endswith(("Error", "Exception", "Busy"))
                               for base in node.bases))
    assert elsewhere == []
