"""mini-swe-agent, unmodified, through ARC: its own DefaultAgent, LitellmTextbasedModel and
default text-based config (``mini_textbased.yaml``), pointed at ``arc-vllm serve``. The only
change is one header, ``X-ARC-Session``, passed through litellm's ``extra_headers``.

Commands run in mini-swe-agent's own bubblewrap sandbox (read-only system, a scratch work
folder, no network): the model's commands are whatever the model says.

Run (with ``make run`` serving on 127.0.0.1:8000):

    .venv/bin/python examples/mini_swe_agent.py [--base-url URL] [--turns 10] [--window N]

Prints each step and the session's ARC counts; exits 1 if ARC answered with an error.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from arc_session import create_session, options, session_info

# litellm fetches a model price list from the internet on import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")




def run(base: str, steps: int, window: int | None = None, task: str | None = None) -> dict:
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import builtin_config_dir
    from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    session = create_session(base, window)
    model_id = json.loads(urllib.request.urlopen(f"{base}/v1/models", timeout=30).read())["data"][0]["id"]
    config = yaml.safe_load((builtin_config_dir / "mini_textbased.yaml").read_text())
    model_config = dict(config["model"])
    model_config["model_kwargs"] = {**model_config.get("model_kwargs", {}), "api_base": f"{base}/v1",
                                    "api_key": "none", "max_tokens": 96, "temperature": 0.0,
                                    "extra_headers": {"X-ARC-Session": session}}
    model = LitellmTextbasedModel(model_name=f"hosted_vllm/{model_id}",
                                  cost_tracking="ignore_errors", **model_config)
    env_config = config.get("environment") or {}
    environment = BubblewrapEnvironment(
        env=env_config.get("env") or {}, timeout=20,
        wrapper_args=BubblewrapEnvironment(env={}).config.wrapper_args + ["--unshare-net"])
    agent_config = {key: value for key, value in config["agent"].items() if key != "mode"}
    # A small model often misses the format; the agent answers each miss and goes on.
    agent_config.update(step_limit=steps, cost_limit=0, max_consecutive_format_errors=0)
    agent = DefaultAgent(model, environment, **agent_config)
    task = task or ("The script count.py should print the number of lines in data.txt, but it "
                    "prints nothing. Find out why and fix it.")
    try:
        result = agent.run(task)
    finally:
        environment.cleanup()
    info = session_info(base, session)
    return {"session": session, "exit": result, "model_calls": agent.n_calls,
            "messages": agent.messages, "arc": info}


def main() -> int:
    args = options(__doc__)
    outcome = run(args.base_url, args.turns, args.window)
    for message in outcome["messages"][2:]:
        print(f"--- {message['role']}\n{str(message.get('content'))[:300]}")
    print(json.dumps({key: outcome[key] for key in ("session", "exit", "model_calls", "arc")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
