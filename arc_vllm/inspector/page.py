"""The inspector's HTML shell: ``static/inspector.html`` with its CSS and script inline, so
the page is one response that needs nothing from outside (it works offline) and carries no
session data: the script reads everything through the JSON routes, with the API key when
the server has one. Served at ``/v1/arc/ui`` by ``vllm serve MODEL --arc --arc-ui``
(``serving/inspector_routes.py``); ``/v1/arc/ui?session=<sid>`` opens one session.

Run ``python -m arc_vllm.inspector.page > inspector.html`` to write the shell.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

STATIC = Path(__file__).parent / "static"


@lru_cache(maxsize=1)
def shell_html() -> str:
    html = (STATIC / "inspector.html").read_text()
    return (html.replace("/*STYLE*/", (STATIC / "inspector.css").read_text())
            .replace("/*SCRIPT*/", (STATIC / "inspector.js").read_text()))


if __name__ == "__main__":
    print(shell_html())
