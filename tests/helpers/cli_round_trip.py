"""Claude Code and Codex CLI, each one round trip through ARC, inside a loopback-only network
namespace: an ARC server on the tiny model (a 32k window: their first requests are 10-13k
tokens; answers ended after a few tokens by ``short_answers``), then

    claude -p "List the files here." --model smol --session-id ID   (ANTHROPIC_BASE_URL)
    codex exec --json ... -m smol "List the files here."             (a Responses provider)

each with HOME in a scratch folder, and what ARC recorded of their sessions, as JSON on
stdout. With ``--compact``, each CLI then compacts twice with its window set small, as a user
of a local model sets it, and goes on after each:

    claude -p "/compact" --continue; claude -p "Go on." --continue     (twice;
                                                  CLAUDE_CODE_MAX_CONTEXT_TOKENS=20000)
    codex exec resume --last "Go on."            (twice; -c model_context_window=9500: its
                                                  instructions and tools alone are ~8.8k, so it
                                                  compacts before each turn)

and the observations ARC stored in each session come back too. With ``--humans``, each CLI
then starts a conversation of its own (its own HOME and folder) and the user speaks again and
again, pasting two logs of ~10k tokens each so that ARC must compact a 32k window:

    claude -p "List the files here."; claude -p SECOND --continue; claude -p PASTE1 --continue;
    claude -p PASTE2 --continue; claude -p "Go on." --continue
    codex exec "List the files here."; codex exec resume --last SECOND; ... (the same)

and after each run the session's view as the model last saw it comes back, with the texts the
user sent. Run by ``tests/test_agent_clis.py`` through ``ray_cluster.isolated_command``, never
outside a namespace (the CLIs would try the internet):

    unshare -n sh -c 'ip link set lo up && python tests/helpers/cli_round_trip.py DIR'
"""

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from arc_vllm.core.transcript import HUMAN_SIGNATURE  # noqa: E402
from arc_vllm.model_prep import prepare_tiny  # noqa: E402
from arc_vllm.paths import npm_bin_dir  # noqa: E402
from arc_vllm.serving.local import Server  # noqa: E402
from tests.helpers.processes import check_machine_class, on_python_path  # noqa: E402

PROMPT = "List the files here."
PROMPT_MARKERS = ("CONTEXT CHECKPOINT COMPACTION", "CRITICAL: Respond with TEXT ONLY")
# Codex's own https traffic (its metrics exporter to ab.chatgpt.com, the curated plugins' sync
# from GitHub) cannot connect inside the namespace, and each run waited about 5 s for it before
# exiting (RUST_LOG=debug shows the turn done in 0.2 s). A proxy on a closed loopback port
# refuses those at once, as on any machine without internet; the server is plain http on
# 127.0.0.1, which the proxy never carries.
DEAD_PROXY = {"HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
              "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def cli_run(command: list[str], env: dict, cwd: Path, server: Server) -> subprocess.CompletedProcess:
    """One CLI run, as ``subprocess.run`` with a 600 s limit, but stopped at once, with the
    server's last log lines, where the server died: the CLIs retry a refused connection for
    minutes, and a run whose engine died (a wrong machine class's kernels, once) hung the suite."""
    deadline = time.time() + 600
    with subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        while True:
            try:
                stdout, stderr = process.communicate(timeout=2)
                return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
            except subprocess.TimeoutExpired:
                if server.process.poll() is None and time.time() < deadline:
                    continue
                process.kill()
                process.communicate()
                why = "the server exited" if server.process.poll() is not None else "600 s passed"
                raise RuntimeError(f"{command[0]} stopped: {why}; the server's log ends:\n"
                                   f"{server.log.read_text()[-3000:]}") from None


def get(base: str, path: str):
    with urllib.request.urlopen(base + path, timeout=60) as response:
        return json.loads(response.read())


def thread_id(stdout: str) -> str | None:
    """The thread a ``codex exec --json`` run started or resumed (its ``thread.started`` event)."""
    return next((event.get("thread_id") for event in map(json.loads, filter(str.strip, stdout.splitlines()))
                 if event.get("type") == "thread.started"), None)


def compact_runs(cli: str, server: Server, work: Path, env: dict, provider: str) -> dict:
    """One CLI compacting twice, going on after each (``--compact``)."""
    if cli == "claude":
        claude_env = dict(env, CLAUDE_CODE_MAX_CONTEXT_TOKENS="20000")
        claude = []
        for _ in range(2):
            for prompt in ("/compact", "Go on."):
                done = cli_run([str(npm_bin_dir() / "claude"), "-p", prompt, "--model", "smol", "--continue"],
                               claude_env, work, server)
                claude.append({"prompt": prompt, "rc": done.returncode, "stdout": done.stdout[-1000:],
                               "stderr": done.stderr[-1000:]})
        return {"claude_compact": claude}
    codex = []
    for _ in range(2):
        done = cli_run([str(npm_bin_dir() / "codex"), "exec", "--json", "--skip-git-repo-check",
                        "-c", "model_provider=local", "-c", provider, "-c", "model_context_window=9500",
                        "-m", "smol", "resume", "--last", "Go on."], env, work, server)
        codex.append({"rc": done.returncode, "stdout": done.stdout[-3000:], "stderr": done.stderr[-2000:]})
    # A provider named "OpenAI": Codex compacts remotely (a compaction_trigger item, then the
    # compaction item in its history), a new thread, then resumed twice.
    remote = (f'model_providers.remote={{name="OpenAI",base_url="{server.base}/v1",'
              'env_key="OPENAI_API_KEY",wire_api="responses"}')
    codex_remote = []
    for arguments in ([PROMPT], ["resume", "--last", "Go on."], ["resume", "--last", "Go on."]):
        done = cli_run([str(npm_bin_dir() / "codex"), "exec", "--json", "--skip-git-repo-check",
                        "-c", "model_provider=remote", "-c", remote, "-c", "model_context_window=9500",
                        "-m", "smol", *arguments], env, work, server)
        codex_remote.append({"rc": done.returncode, "stdout": done.stdout[-3000:], "stderr": done.stderr[-2000:],
                             "thread_id": thread_id(done.stdout)})
    return {"codex_compact": codex, "codex_remote": codex_remote}


SECOND = "IMPORTANT HUMAN INSTRUCTION: never touch the file config/prod.yaml; the spec says the retry budget is 7."


def paste(number: int) -> str:
    """A log a user pastes: ~20 KB, about 14k tokens of the model's tokenizer."""
    return f"Here is failing log {number}, look at it:\n" + "".join(
        f"2026-12-03T1{number}:{line // 60 % 60:02d}:{line % 60:02d} worker-{line % 7} GET /api/items/{line} 200\n"
        for line in range(400))


def human_runs(cli: str, server: Server, folder: Path, env: dict, provider: str) -> dict:
    """One CLI in a conversation of its own, the user writing again and again (``--humans``)."""
    base = server.base
    prompts = [PROMPT, SECOND, paste(1), paste(2), "Go on."]
    home, work = folder / f"{cli}-home", folder / f"{cli}-work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    cli_env = dict(env, HOME=str(home))
    client_id, runs = (str(uuid.uuid4()) if cli == "claude" else None), []
    for number, prompt in enumerate(prompts):
        if cli == "claude":
            command = [str(npm_bin_dir() / "claude"), "-p", prompt, "--model", "smol"] + (
                ["--session-id", client_id] if number == 0 else ["--continue"])
        else:
            command = [str(npm_bin_dir() / "codex"), "exec", "--json", "--skip-git-repo-check", "-c",
                       "model_provider=local", "-c", provider, "-m", "smol"] + (
                [prompt] if number == 0 else ["resume", "--last", prompt])
        done = cli_run(command, cli_env, work, server)
        if cli == "codex" and number == 0:
            client_id = thread_id(done.stdout)
        [session] = [session for session in get(base, "/v1/arc/sessions")["sessions"]
                     if session["client_id"] == client_id] or [None]
        runs.append({"rc": done.returncode, "stderr": done.stderr[-1500:], "prompt": prompt,
                     "view": get(base, f"/v1/arc/sessions/{session['id']}/view") if session else None,
                     "session": session and get(base, f"/v1/arc/sessions/{session['id']}")})
    # Every text the user sent after the task (F), as the session's store returns it by its id.
    recalled = {}
    if runs[-1]["session"]:
        for prompt in prompts[1:]:
            id = hashlib.sha1(f"{HUMAN_SIGNATURE}\x1f{prompt}".encode()).hexdigest()[:8]
            try:
                with urllib.request.urlopen(f"{base}/v1/arc/sessions/{runs[-1]['session']['id']}/observations/{id}",
                                            timeout=60) as response:
                    recalled[prompt] = response.read().decode()
            except OSError:
                recalled[prompt] = None
    return {"client_id": client_id, "runs": runs, "texts": prompts, "recalled": recalled}


def first_run(cli: str, server: Server, env: dict, work: Path, provider: str, claude_id: str) -> dict:
    """One CLI's first request in ``work``: what the test reads of it (its exit, output, id)."""
    if cli == "claude":
        done = cli_run([str(npm_bin_dir() / "claude"), "-p", PROMPT, "--model", "smol",
                        "--session-id", claude_id], env, work, server)
        return {"rc": done.returncode, "stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:],
                "session_id": claude_id}
    done = cli_run([str(npm_bin_dir() / "codex"), "exec", "--json", "--skip-git-repo-check",
                    "-c", "model_provider=local", "-c", provider, "-m", "smol", PROMPT], env, work, server)
    return {"rc": done.returncode, "stdout": done.stdout[-4000:], "stderr": done.stderr[-2000:],
            "thread_id": thread_id(done.stdout)}


def run(folder: Path, compact: bool = False, humans: bool = False) -> dict:
    server = Server(str(prepare_tiny()), folder / "server.log", "--served-model-name", "smol",
                    "--logits-processors", "tests.helpers.short_answers:ShortAnswers",
                    max_model_len=32768, env={"PYTHONPATH": on_python_path(str(REPO))}).wait()
    try:
        check_machine_class(server.process.pid, server.log)
        home, work = folder / "home", folder / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (work / "notes.txt").write_text("a file to list\n")
        env = dict(os.environ, HOME=str(home), ANTHROPIC_BASE_URL=server.base, ANTHROPIC_API_KEY="local",
                   CLAUDE_CODE_MAX_OUTPUT_TOKENS="256", OPENAI_API_KEY="local", **DEAD_PROXY)
        claude_id = str(uuid.uuid4())
        provider = (f'model_providers.local={{name="local",base_url="{server.base}/v1",'
                    'env_key="OPENAI_API_KEY",wire_api="responses"}')

        def chain(cli: str) -> dict:
            """Everything one CLI does, in order (each run continues the one before it)."""
            out = {cli: first_run(cli, server, env, work, provider, claude_id)}
            if compact:
                out.update(compact_runs(cli, server, work, env, provider))
            if humans:
                out["humans"] = human_runs(cli, server, folder, env, provider)
            return out

        # The two CLIs keep their state apart (~/.claude, ~/.codex; their own sessions), so their
        # chains run side by side: each spends most of its time starting or waiting on the server.
        with ThreadPoolExecutor(2) as pool:
            claude, codex = pool.map(chain, ("claude", "codex"))
        extra = {**claude, **codex, **({"humans": {"claude": claude["humans"], "codex": codex["humans"]}}
                                       if humans else {})}
        sessions = get(server.base, "/v1/arc/sessions")["sessions"]
        for session in sessions:
            session["records"] = get(server.base, f"/v1/arc/sessions/{session['id']}/requests")
            if compact:  # the view now, and any stored text holding a client's compaction prompt
                session["view"] = get(server.base, f"/v1/arc/sessions/{session['id']}/view")
                session["prompt_hits"] = sum(len(get(server.base, f"/v1/arc/sessions/{session['id']}/search?q="
                                                     + urllib.parse.quote(marker))["results"])
                                             for marker in PROMPT_MARKERS)
        return {**extra, "sessions": sessions}
    finally:
        server.stop()


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]), "--compact" in sys.argv[2:], "--humans" in sys.argv[2:])))
