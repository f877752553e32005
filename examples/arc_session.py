"""What the real-client examples share: an ARC session on `arc-vllm serve`, and their options.

    session = create_session(base, window=4096)   # POST /v1/arc/sessions
    args = options(__doc__, turns=10)               # --base-url, --turns, --window
"""

from __future__ import annotations

import argparse
import json
import urllib.request


def create_session(base: str, window: int | None = None) -> str:
    """A new session; ``window`` asks for a smaller context window than the server's."""
    budgets = {"context_window": window} if window else {}
    request = urllib.request.Request(f"{base}/v1/arc/sessions", method="POST",
                                     data=json.dumps({"budgets": budgets}).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=30).read())["id"]


def session_info(base: str, session: str) -> dict:
    with urllib.request.urlopen(f"{base}/v1/arc/sessions/{session}", timeout=30) as response:
        return json.loads(response.read())


def options(doc: str, turns: int = 10, flags: dict[str, str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--turns", type=int, default=turns, help="model calls or turns")
    parser.add_argument("--window", type=int, default=None, help="the session's context window")
    for flag, help_text in (flags or {}).items():
        parser.add_argument(flag, action="store_true", help=help_text)
    return parser.parse_args()
