"""Claude Code and Codex CLI, each one round trip through ARC, inside a loopback-only network
namespace: an ARC server on the tiny model (a 32k window: their first requests are 10-13k
tokens; answers ended after a few tokens by ``short_answers``), then

    claude -p "List the files here." --model smol --session-id ID   (ANTHROPIC_BASE_URL)
    codex exec --json ... -m smol "List the files here."             (a Responses provider)

each with HOME in a scratch folder, and what ARC recorded of their sessions, as JSON on
stdout. Run by ``tests/test_agent_clis.py`` through ``ray_cluster.isolated_command``, never
outside a namespace (the CLIs would try the internet):

    unshare -n sh -c 'ip link set lo up && python tests/helpers/cli_round_trip.py DIR'
"""

import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from arc_vllm.model_prep import prepare_tiny  # noqa: E402
from arc_vllm.paths import npm_bin_dir  # noqa: E402
from arc_vllm.serving.local import Server  # noqa: E402

PROMPT = "List the files here."


def get(base: str, path: str):
    with urllib.request.urlopen(base + path, timeout=60) as response:
        return json.loads(response.read())


def run(folder: Path) -> dict:
    server = Server(str(prepare_tiny()), folder / "server.log", "--served-model-name", "smol",
                    "--logits-processors", "tests.helpers.short_answers:ShortAnswers",
                    max_model_len=32768, env={"PYTHONPATH": str(REPO)}).wait()
    try:
        home, work = folder / "home", folder / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (work / "notes.txt").write_text("a file to list\n")
        env = dict(os.environ, HOME=str(home), ANTHROPIC_BASE_URL=server.base, ANTHROPIC_API_KEY="local",
                   CLAUDE_CODE_MAX_OUTPUT_TOKENS="256", OPENAI_API_KEY="local")
        claude_id = str(uuid.uuid4())
        claude = subprocess.run([str(npm_bin_dir() / "claude"), "-p", PROMPT, "--model", "smol",
                                 "--session-id", claude_id], env=env, cwd=work, capture_output=True,
                                text=True, timeout=600)
        provider = (f'model_providers.local={{name="local",base_url="{server.base}/v1",'
                    'env_key="OPENAI_API_KEY",wire_api="responses"}')
        codex = subprocess.run([str(npm_bin_dir() / "codex"), "exec", "--json", "--skip-git-repo-check",
                                "-c", "model_provider=local", "-c", provider, "-m", "smol", PROMPT],
                               env=env, cwd=work, capture_output=True, text=True, timeout=600)
        threads = [event.get("thread_id") for event in map(json.loads, filter(str.strip, codex.stdout.splitlines()))
                   if event.get("type") == "thread.started"]
        sessions = get(server.base, "/v1/arc/sessions")["sessions"]
        for session in sessions:
            session["records"] = get(server.base, f"/v1/arc/sessions/{session['id']}/requests")
        return {"claude": {"rc": claude.returncode, "stdout": claude.stdout[-2000:], "stderr": claude.stderr[-2000:],
                           "session_id": claude_id},
                "codex": {"rc": codex.returncode, "stdout": codex.stdout[-4000:], "stderr": codex.stderr[-2000:],
                          "thread_id": threads[0] if threads else None},
                "sessions": sessions}
    finally:
        server.stop()


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]))))
