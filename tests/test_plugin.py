"""ARC as a vLLM plugin: vLLM's own server module with ``--arc`` serves ARC sessions, and the
same module without it is plain vLLM. Plus what the plugin does to vLLM's arguments, and a
non-editable install (a built wheel) carrying everything read at run time.

    pytest tests/test_plugin.py
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from openai import OpenAI

from tests.helpers.arguments import parse

ROOT = Path(__file__).resolve().parents[1]




def test_without_arc_the_arguments_are_vllms_own(monkeypatch):
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    args = parse(["--model", "m"])
    assert args.arc is False and args.scheduler_cls is None
    assert args.enable_prompt_tokens_details is False
    assert "VLLM_PLUGINS" not in os.environ


def test_arc_sets_the_hook_the_usage_details_and_allowlists_only_what_was_allowed(monkeypatch):
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    args = parse(["--model", "m", "--arc", "--arc-store-dir", "/tmp/s", "--arc-recent-turns", "3"])
    assert args.arc and args.scheduler_cls == "arc_vllm.serving.scheduler.ArcScheduler"
    assert args.enable_prompt_tokens_details and args.arc_store_dir == "/tmp/s"
    from arc_vllm.serving.options import ServeOptions

    assert ServeOptions.of(args).budgets == {"recent_turns": 3}
    # Unset meant "every plugin": it stays every discovered plugin, ARC's endpoint added.
    allowed = os.environ["VLLM_PLUGINS"].split(",")
    assert "arc" in allowed and "lora_filesystem_resolver" in allowed
    monkeypatch.setenv("VLLM_PLUGINS", "someone_elses")
    args = parse(["--model", "m", "--arc", "--scheduler-cls", "my.Scheduler"])
    assert os.environ["VLLM_PLUGINS"] == "someone_elses,arc"
    assert args.scheduler_cls == "my.Scheduler"  # named after --arc: the user's wins


def test_unknown_arc_options_are_refused_by_vllms_parser(capsys):
    with pytest.raises(SystemExit):
        parse(["--model", "m", "--arc", "--arc-bogus", "1"])
    assert "--arc-bogus" in capsys.readouterr().err


def test_every_arc_flag_is_declared_once_and_reads_back_typed_with_its_one_default():
    """The parser's ``--arc-*`` flags are ``ServeOptions``' fields and ``ArcConfig``'s budgets,
    nothing else; with none given, ``ServeOptions.of`` reads back exactly the declared defaults,
    and a flag given comes back typed."""
    import argparse
    from dataclasses import fields

    from arc_vllm.core.config import ArcConfig
    from arc_vllm.serving import plugin
    from arc_vllm.serving.options import ServeOptions

    parser = argparse.ArgumentParser()
    plugin.add_arc_arguments(parser)
    flags = {option for action in parser._actions for option in action.option_strings if option.startswith("--arc")}
    declared = {f"--arc-{spec.name.replace('_', '-')}" for spec in fields(ServeOptions) if spec.name != "budgets"}
    budgets = {f"--arc-{name.replace('_', '-')}" for name in ArcConfig.options()}
    assert flags == {"--arc"} | (declared - {"--arc-arc"}) | budgets
    assert ServeOptions.of(parse(["--model", "m", "--arc"])) == ServeOptions(arc=True)
    given = ServeOptions.of(parse(["--model", "m", "--arc", "--arc-store-lease", "2.5", "--arc-max-sessions", "7",
                                   "--arc-implicit-sessions", "off", "--arc-recent-turns", "3"]))
    assert (given.store_lease, given.max_sessions, given.implicit_sessions, given.budgets) == (2.5, 7, "off", {"recent_turns": 3})
    with pytest.raises(ValueError, match="give one"):
        ServeOptions(store="/a", store_dir="/b").store_named


def request(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    call = urllib.request.Request(base + path, data=data, method=method,
                                  headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(call, timeout=120) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if b"{" in raw[:1] else raw.decode())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def servers(plugin_arc_server, plain_server):
    """vLLM's own server module on the tiny model with --arc, beside the run's shared plain
    vLLM (the same module without it), both with the embedded model's tool-calling template
    (``tests/helpers/servers.py``)."""
    return plugin_arc_server, plain_server


MESSAGES = [{"role": "system", "content": "You are a careful agent. " * 40},
            {"role": "user", "content": "Find the port in the log."},
            {"role": "assistant", "content": "Reading it."},
            {"role": "user", "content": "\n".join(f"line {i}: nothing here" for i in range(300))}]


@pytest.mark.slow
def test_vllm_entry_with_arc_serves_sessions_through_the_engine_hook(servers):
    server, _ = servers
    status, session = request(server.base, "POST", "/v1/arc/sessions", {})
    assert status == 201 and session["id"].startswith("sess_")
    client = OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    reply = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=8, temperature=0,
        extra_body={"vllm_xargs": {"arc_session": session["id"]}})
    arc = reply.model_extra["arc"]
    assert arc["session"] == session["id"] and reply.usage.prompt_tokens == arc["view_tokens"]
    status, described = request(server.base, "GET", f"/v1/arc/sessions/{session['id']}")
    assert status == 200 and described["requests"] == 1 and described["observations"] >= 1
    status, metrics = request(server.base, "GET", "/metrics")
    requests = [line for line in metrics.splitlines() if line.startswith("arc_engine_requests_total")]
    assert requests and float(requests[0].split()[-1]) >= 1  # the --scheduler-cls hook ran


@pytest.mark.slow
@pytest.mark.parametrize("explicit", [False, True])
def test_until_arc_acts_a_conversation_costs_nothing(servers, explicit):
    """A conversation that fits gets, with --arc, the prompt plain vLLM builds: the same
    tokens (vLLM's own /tokenize of the client's messages and of ARC's view), the same
    greedy answer, the same prefix-cache hits on its next turn."""
    server, plain = servers
    client = OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    plain_client = OpenAI(base_url=plain.base + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    xargs = {"arc_debug": True}
    if explicit:
        xargs["arc_session"] = request(server.base, "POST", "/v1/arc/sessions", {})[1]["id"]
    nonce = f"{'explicit' if explicit else 'implicit'} run"
    messages = [{"role": "system", "content": f"You are a careful agent ({nonce}). " + "Check twice. " * 100},
                {"role": "user", "content": "Count from 1 to 20."}]
    for turn in range(2):
        reply = client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                               temperature=0, extra_body={"vllm_xargs": xargs})
        baseline = plain_client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                                        temperature=0)
        arc = reply.model_extra["arc"]
        assert arc["compactions"] == 0
        _, ours = request(server.base, "POST", "/tokenize", {"model": model, "messages": arc["views"][-1],
                                                              "add_generation_prompt": True})
        _, theirs = request(plain.base, "POST", "/tokenize", {"model": model, "messages": messages,
                                                               "add_generation_prompt": True})
        assert ours["tokens"] == theirs["tokens"]
        assert reply.usage.prompt_tokens == baseline.usage.prompt_tokens == theirs["count"]
        assert reply.choices[0].message.content == baseline.choices[0].message.content
        if turn:  # the same blocks came from the prefix cache as for plain vLLM
            assert reply.usage.prompt_tokens_details.cached_tokens == \
                baseline.usage.prompt_tokens_details.cached_tokens > 0
        messages = messages + [{"role": "assistant", "content": reply.choices[0].message.content},
                               {"role": "user", "content": "Again, please. " * 60}]


def test_implicit_sessions_off_leaves_requests_naming_none_to_vllm():
    """ARC's route in front of each conversational API hands vLLM's own route every request
    naming no session while implicit sessions are off, and, while they are on, what ARC does
    not take (several choices, image content), body intact."""
    import asyncio
    from types import SimpleNamespace

    from arc_vllm.serving.api_route import ArcRoute
    from arc_vllm.serving.options import ServeOptions
    from arc_vllm.serving.errors import Declined
    from arc_vllm.serving.apis.chat import ChatAPI
    from arc_vllm.serving.apis.messages import MessagesAPI
    from arc_vllm.serving.apis.responses import ResponsesAPI

    class Original:
        def __init__(self):
            self.bodies = []

        async def handle(self, scope, receive, send):
            self.bodies.append((await receive())["body"])

    def send_through(route, body, implicit):
        options = ServeOptions(arc=True, implicit_sessions="on" if implicit else "off")
        app = SimpleNamespace(state=SimpleNamespace(arc_options=options))
        raw = json.dumps(body).encode()

        sent = []

        async def receive():  # as ASGI's: the body, then nothing until the client leaves
            if sent:
                await asyncio.Event().wait()
            sent.append(raw)
            return {"type": "http.request", "body": raw, "more_body": False}

        async def send(message):
            raise AssertionError("ARC answered a request it should have left to vLLM")

        asyncio.run(route.handle({"type": "http", "method": "POST", "headers": [], "app": app}, receive, send))
        return raw

    body = {"messages": [{"role": "user", "content": "hi"}]}
    for api in (ChatAPI(), MessagesAPI(), ResponsesAPI()):
        original = Original()
        raw = send_through(ArcRoute(original, api), body, implicit=False)
        assert original.bodies == [raw]
    # What ARC does not take, plain vLLM still serves: several choices, image content.
    declined = [(ChatAPI(), dict(body, n=2)),
                (ChatAPI(), {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]}),
                (MessagesAPI(), {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
                (MessagesAPI(), {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                                             "content": [{"type": "image", "source": {}}]}]}]}),
                (ResponsesAPI(), {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]})]
    for api, refused in declined:
        with pytest.raises(Declined):
            api.declines(refused)
        original = Original()
        send_through(ArcRoute(original, api), refused, implicit=True)
        assert len(original.bodies) == 1
    for api in (ChatAPI(), MessagesAPI(), ResponsesAPI()):
        api.declines({"messages": body["messages"], "input": "hi"})  # text: ARC's
    assert parse(["--model", "m", "--arc", "--arc-implicit-sessions", "off"]).arc_implicit_sessions == "off"
    assert parse(["--model", "m", "--arc"]).arc_implicit_sessions == "on"


@pytest.mark.slow
def test_the_same_module_without_arc_is_plain_vllm(servers):
    _, plain = servers
    status, _ = request(plain.base, "POST", "/v1/arc/sessions", {})
    assert status == 404
    client = OpenAI(base_url=plain.base + "/v1", api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    reply = client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=8, temperature=0,
        extra_body={"vllm_xargs": {"arc_session": "sess_anything"}})
    assert "arc" not in (reply.model_extra or {}) and reply.usage.prompt_tokens > 300
    status, metrics = request(plain.base, "GET", "/metrics")
    assert "arc_sessions" not in metrics and "arc_engine_requests" not in metrics
    assert "custom scheduler class" not in plain.log.read_text()


@pytest.mark.slow
def test_a_wheel_carries_the_plugin_and_everything_read_at_run_time(tmp_path):
    """``pip install .`` (not editable) must work: templates, CUDA sources, the specs file and
    both entry points are in the wheel, and the installed package finds them."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("arc_vllm-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("arc_vllm/templates/smollm2_tools.jinja", "arc_vllm/cost/specs.json",
                   "arc_vllm/kernels/csrc/relocate_kv.cu", "arc_vllm/kernels/csrc/relocate_kv_binding.cpp",
                   "arc_vllm/serving/plugin.py", "arc_vllm/inspector/static/inspector.js",
                   "arc_vllm/kv/spans.py"):
        assert needed in names, needed
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                                str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    check = (
        "import importlib.metadata as m, arc_vllm\n"
        "from arc_vllm.model_prep import TOOLS_TEMPLATE\n"
        "from arc_vllm.kernels.relocate_kv_cuda import CSRC\n"
        "from arc_vllm.cost.roofline import SPECS\n"
        f"assert arc_vllm.__file__.startswith({str(target)!r}), arc_vllm.__file__\n"
        "assert TOOLS_TEMPLATE.is_file() and (CSRC / 'relocate_kv.cu').is_file() and SPECS\n"
        f"dist = next(m.distributions(path=[{str(target)!r}]))\n"
        "print(sorted((e.group, e.name, e.value) for e in dist.entry_points))\n")
    ran = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(target)), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "('vllm.endpoint_plugins', 'arc', 'arc_vllm.serving.plugin:ArcEndpoint')" in ran.stdout
    assert "('vllm.general_plugins', 'arc', 'arc_vllm.serving.plugin:register')" in ran.stdout
