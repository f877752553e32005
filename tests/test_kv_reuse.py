"""``--arc-kv-reuse`` end to end: the option, a served session through many compactions with the
engine in its own processes, and ``arc-vllm bench kv-reuse`` writing its figures.

    pytest tests/test_kv_reuse.py
"""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from openai import OpenAI

from arc_vllm.kv.config import default_recompute_tokens
from arc_vllm.model_prep import prepare_tiny

from tests.helpers.arguments import parse
from tests.helpers.conversations import tool_turn
from tests.helpers.http_calls import call
from tests.helpers.processes import side_by_side

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.memory(5)  # two bench runs' engines at once


def test_kv_reuse_implies_arc_and_names_the_connector(monkeypatch):
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    args = parse(["--model", "m", "--arc-kv-reuse", "--arc-kv-reuse-recompute", "32"])
    assert args.arc and args.arc_kv_reuse and args.arc_kv_reuse_recompute == 32
    # Unnamed, the engine's dtype decides (at start, in the API process: KVWarmup).
    assert parse(["--model", "m", "--arc-kv-reuse"]).arc_kv_reuse_recompute is None
    assert args.scheduler_cls == "arc_vllm.serving.scheduler.ArcScheduler"
    config = args.kv_transfer_config
    assert config.kv_connector == "ArcKVConnector" and config.kv_role == "kv_both"
    assert config.kv_connector_module_path == "arc_vllm.kv.connector"
    # A connector the user names, before or after, is kept.
    mine = '{"kv_connector": "MyConnector", "kv_role": "kv_both"}'
    for argv in (["--kv-transfer-config", mine, "--arc-kv-reuse"], ["--arc-kv-reuse", "--kv-transfer-config", mine]):
        assert parse(["--model", "m", *argv]).kv_transfer_config.kv_connector == "MyConnector"
    assert parse(["--model", "m", "--arc"]).kv_transfer_config is None
    for argv in (["--arc-kv-reuse", "--arc-kv-reuse-host-tokens", "4096"],
                 ["--arc-kv-reuse-host-tokens", "4096", "--arc-kv-reuse"]):
        assert parse(["--model", "m", *argv]).kv_transfer_config.kv_connector_extra_config == \
            {"host_tokens": 4096, "min_run": 16, "max_moves": 1, "min_gain": 128}
    for argv in (["--arc-kv-reuse", "--arc-kv-reuse-max-moves", "3", "--arc-kv-reuse-min-gain", "32"],
                 ["--arc-kv-reuse-max-moves", "3", "--arc-kv-reuse-min-gain", "32", "--arc-kv-reuse"]):
        extra = parse(["--model", "m", *argv]).kv_transfer_config.kv_connector_extra_config
        assert (extra["max_moves"], extra["min_gain"]) == (3, 32)


@pytest.mark.slow
def test_a_session_through_compactions_reuses_kv_and_loses_nothing(kv_reuse_server):
    status, session = call(kv_reuse_server.base, "POST", "/v1/arc/sessions")
    assert status == 201
    client = OpenAI(base_url=kv_reuse_server.base + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    messages = [{"role": "system", "content": "You are an agent."},
                {"role": "user", "content": "Read every log and report anomalies."}]
    warmed, compactions, bodies, arcs = 0, 0, [], []
    for index in range(24):
        # Logs of about 400 tokens: H keeps some of them through a compaction (moved: KV reuse has
        # runs to claim); a log over H's cap would be cited in place, with nothing to move.
        body = "".join(f"log {index} line {n}: status ok, latency {n * 7 % 97} ms\n" for n in range(24))
        turn, _ = tool_turn(index, body)
        messages += turn
        bodies.append(body)
        reply = client.chat.completions.create(
            model=model, messages=messages, max_tokens=8,
            extra_body={"vllm_xargs": {"arc_session": session["id"]}})
        arc = reply.model_extra["arc"]
        assert arc["view_tokens"] <= arc["budget_tokens"]
        warmed += arc["kv_warmup_tokens"]
        compactions += arc["compactions"]
        arcs.append(arc)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    assert compactions >= 3 and warmed > 0
    # What each compaction freed and left to prefill anew (issue 54): none without one; with
    # one, the uncached part lies within the view (what the compaction changed, from its first
    # differing token; the connector's warm-up then gives part of it back as cached).
    for arc in arcs:
        if arc["compactions"]:
            assert arc["compaction_freed_tokens"] > 0
            assert 0 < arc["compaction_uncached_tokens"] <= arc["view_tokens"]
        else:
            assert arc["compaction_freed_tokens"] == arc["compaction_uncached_tokens"] == 0
    metrics = urllib.request.urlopen(kv_reuse_server.base + "/metrics").read().decode()
    engine = {}
    for line in metrics.splitlines():  # summed over label sets (the connector's carry vLLM's labels)
        if line.startswith(("arc_engine_", "arc_kv_")):
            name = line.split()[0].split("{")[0]
            engine[name] = engine.get(name, 0) + float(line.split()[-1])
    assert engine["arc_kv_reuse_enabled"] == 1  # the start-up layout check passed
    # ... and says so in the server's log, with the recomputation the API process runs with.
    log = Path(kv_reuse_server.log).read_text(errors="replace")
    assert "KV-reuse layout check passed" in log
    assert "tokens of each reused run are recomputed (the default for" in log
    # The connector supplied KV, counted apart from the prefix cache's, within the prompts.
    assert engine["arc_engine_kv_reused_tokens_total"] > 0
    assert engine["arc_engine_kv_reused_tokens_total"] + engine["arc_engine_prefix_cached_tokens_total"] \
        <= engine["arc_engine_prompt_tokens_total"]
    status, info = call(kv_reuse_server.base, "GET", f"/v1/arc/sessions/{session['id']}")
    assert info["observations"] == 24 and info["requests"] == 24
    # The session's records keep the same figures, and Prometheus sums them.
    status, records = call(kv_reuse_server.base, "GET", f"/v1/arc/sessions/{session['id']}/requests")
    for name in ("compaction_freed_tokens", "compaction_uncached_tokens"):
        assert [record[name] for record in records] == [arc[name] for arc in arcs]
        served = sum(float(line.split()[-1]) for line in metrics.splitlines()
                     if line.startswith(f"arc_{name}_total{{"))
        assert served >= sum(arc[name] for arc in arcs) > 0


@pytest.mark.slow
def test_every_metric_the_grafana_dashboard_queries_is_on_metrics(kv_reuse_server):
    """docs/grafana/arc-vllm.json against a running server's /metrics (this one has every
    ARC metric: the engine hook's, the KV-reuse connector's, the API process's)."""
    import re

    dashboard = json.loads((ROOT / "docs" / "grafana" / "arc-vllm.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\b(?:arc_[a-z_]+|vllm:[a-z_:]+)", target["expr"])}
    assert len(queried) >= 15
    # One ARC request, so that every histogram and counter has samples even when this test
    # runs alone.
    client = OpenAI(base_url=kv_reuse_server.base + "/v1", api_key="none", max_retries=0)
    client.chat.completions.create(model=client.models.list().data[0].id, max_tokens=2,
                                   messages=[{"role": "user", "content": "hello"}])
    metrics = urllib.request.urlopen(kv_reuse_server.base + "/metrics").read().decode()
    exported = {re.split(r"[{ ]", line, maxsplit=1)[0] for line in metrics.splitlines()
                if line and not line.startswith("#")}
    assert queried <= exported, sorted(queried - exported)


BENCH_RUNS = {
    # Three compaction turns, both recompute variants, one chained trajectory, one NIAH task.
    "figures": ("--turns", "3", "--recompute", "0,default", "--chains", "1", "--niah-tasks", "1",
                "--niah-max-calls", "6"),
    # 18 compaction turns: of the sample's first 16 none moves enough for the connector to
    # claim (compactions that cite in place, and since 2026-12-06 no catalog page that repeats
    # S, issue 54); the 17th does.
    "diagnose": ("--turns", "18", "--recompute", "0", "--chains", "0", "--niah-tasks", "0", "--diagnose",
                 "--dtype", "bfloat16", "--attention-isa", "vec"),
}


@pytest.fixture(scope="module")
def bench_runs(tmp_path_factory):
    """Both ``arc-vllm bench kv-reuse`` runs, side by side (each engine on one of the two
    cores), their output in files (a pipe nobody reads yet would stall one); each test waits
    for its own."""
    folder = tmp_path_factory.mktemp("bench-kv-reuse")
    started = {}
    for name, options in BENCH_RUNS.items():
        (folder / name).mkdir()
        with open(folder / name / "stdout", "w") as stdout, open(folder / name / "stderr", "w") as stderr:
            started[name] = subprocess.Popen(
                [str(Path(sys.executable).parent / "arc-vllm"), "bench", "kv-reuse", "--model", str(prepare_tiny()),
                 *options, "--out", str(folder / name)],
                stdout=stdout, stderr=stderr, cwd=ROOT,
                env=side_by_side(VLLM_CPU_KVCACHE_SPACE="1"))
    yield {name: (process, folder / name) for name, process in started.items()}
    for process in started.values():
        process.kill()
        process.wait()


def finished(bench_runs, name: str) -> tuple[str, dict]:
    """The run's stdout and its ``kv_reuse.json``, once it has ended well."""
    process, out = bench_runs[name]
    process.wait(timeout=900)
    assert process.returncode == 0, (out / "stderr").read_text()[-3000:]
    return (out / "stdout").read_text(), json.loads((out / "kv_reuse.json").read_text())


@pytest.mark.slow
def test_bench_kv_reuse_writes_its_figures(bench_runs):
    stdout, result = finished(bench_runs, "figures")
    computed = result["prefill_tokens_computed"]
    assert result["compaction_turns"] == 3
    # The figures name what they came from: the engine's KV layout, its dtype, the CPU's flags.
    where = result["machine"]
    assert where["isa"] in ("vec", "vec16", "amx") and where["dtype"] in ("float32", "bfloat16")
    assert "avx2" in where["cpu_flags"] and all(check["ok"] for check in where["kv_reuse_check"])
    assert 0 < computed["on"] < computed["off"] <= result["compaction_prompt_tokens"]
    assert result["variants"]["on"]["kv_reused_tokens"] > 0
    # 'default' is what --arc-kv-reuse serves with for the engine's dtype.
    assert set(result["variants"]) == {"on", f"on+r{default_recompute_tokens(where['dtype'])}"}
    # The headline is the first variant's (all reused, nothing recomputed), and reused KV
    # answers as recomputed KV does: a relocation that put KV at the wrong places would show
    # here as disagreement and divergence.
    assert (result["greedy_agreement"], result["mean_kl"]) == (result["variants"]["on"]["greedy_agreement"],
                                                               result["variants"]["on"]["mean_kl"])
    assert result["greedy_agreement"] >= 0.9 and result["mean_kl"] <= 0.05
    chain = result["chained"]  # one trajectory, every view in order
    assert chain["trajectories"] == 1 and chain["compaction_turns"] >= 2
    assert chain["prefill_tokens_computed"]["on"] < chain["prefill_tokens_computed"]["off"]
    assert chain["greedy_agreement"] >= 0.9 and chain["mean_kl"] <= 0.05
    floor = chain["chunked"]  # the same chunks, nothing reused: the engine's own numerics
    assert floor["greedy_agreement"] >= 0.9 and floor["mean_kl"] <= 0.05
    assert "the floor" in stdout
    assert set(result["niah_accuracy"]) == {"off", "on"}
    assert all(0 <= accuracy <= 1 for accuracy in result["niah_accuracy"].values())
    assert "| on |" in stdout and "| off |" in stdout


@pytest.mark.slow
def test_the_diagnosis_separates_where_reused_kvs_error_comes_from(bench_runs):
    """``--diagnose`` reads the reused and the recomputed KV back from the engine's cache, in
    bfloat16 with the vec kernel forced where the engine would take amx (run unchanged on a
    machine without AMX, where vec is the engine's own choice), over 18 compaction turns
    (``BENCH_RUNS``)."""
    stdout, result = finished(bench_runs, "diagnose")
    assert result["machine"]["isa"] == "vec" and result["machine"]["dtype"] == "bfloat16"
    diagnosis = result["diagnosis"]
    assert diagnosis["pairs"] >= 1 and diagnosis["moved_tokens"] > 0
    assert diagnosis["claims_as_planned"]  # the engine claimed what the rule planned
    rounding = diagnosis["rounding"]
    # Layer 0: the move's arithmetic only, within bfloat16's rounding; chunking changes nothing there.
    assert 0 < rounding["on_layer0_key"] < 2 ** -5 and rounding["chunked_layer0_key"] <= rounding["on_layer0_key"]
    assert rounding["move_unrounded_layer0_key"] <= rounding["on_layer0_key"]
    layers = diagnosis["layers"]
    assert len(layers) == json.loads((prepare_tiny() / "config.json").read_text())["num_hidden_layers"]
    # The missing cross-attention: deeper layers of moved KV deviate more than the move itself.
    assert layers[-1]["on_key"] > layers[0]["on_key"] and layers[-1]["on_value"] > 0
    assert set(diagnosis["by_seam"]) == {"0-7", "8-31", "32-127", "128+"}
    assert sum(row["tokens"] for row in diagnosis["by_seam"].values()) == diagnosis["moved_tokens"]
    for mode in ("chunked", "on"):
        assert 0 <= diagnosis["outputs"][mode]["greedy_agreement"] <= 1
    assert "Diagnosis over" in stdout and "re-rotation rounding" in stdout


def test_the_default_recomputation_follows_the_dtype():
    # float32's reused KV meets the targets (agreement 0.9, KL 0.02, chained 0.85) at 192 recomputed
    # tokens; 16-bit dtypes need 256 to keep recomputation's KL
    # (docs/kv-reuse.md, "The default").
    assert default_recompute_tokens("float32") == default_recompute_tokens("torch.float32") == 192
    assert default_recompute_tokens("bfloat16") == default_recompute_tokens("torch.float16") == 256


def test_a_negative_recomputation_is_refused_at_the_command_line(capsys):
    with pytest.raises(SystemExit):
        parse(["--model", "m", "--arc-kv-reuse", "--arc-kv-reuse-recompute", "-1"])
    assert "expected 0 or more tokens, not -1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["--model", "m", "--arc-kv-reuse", "--arc-kv-reuse-max-moves", "-2"])
    assert "not -2" in capsys.readouterr().err


def test_bench_kv_reuse_refuses_bad_options_clearly(capsys):
    from arc_vllm.evaluation.kv_reuse_bench import main

    for argv, message in ((["--recompute", "x"], "expected comma-separated integers"),
                          (["--recompute", "-1"], "N >= 0"), (["no/such/log.jsonl"], "no such file"),
                          (["--recent-kept-percent", "5"], "expected 10 to 100")):
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err
