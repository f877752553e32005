"""``arc-vllm replay ... --html``: ``DIR/report.html``, one self-contained file (inline SVG and
CSS, no script, nothing fetched) that opens offline. It shows, per trajectory, the timeline of
ARC's replay (``inspector/timeline.py``, the inspector's own), and with ``--methods`` the
methods side by side: a table of tokens per step, calls over the window, prefix reuse and
exact recoverability, and per trajectory each method's prompt tokens per step.

    write_report(out, timelines=load_timelines(arc_dir), summary=arc_summary, methods=summaries)

Run ``python -m arc_vllm.inspector.report DIR`` to (re)write DIR/report.html from a replay's
output folder.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from arc_vllm.inspector.timeline import LEFT, RIGHT, TOP, BOTTOM, replay_points, timeline_svg

COLOURS = ["#1f5fbf", "#c0392b", "#2e9e5b", "#8e44ad", "#e67e22", "#16a085", "#7f8c8d", "#d35400"]
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:1rem 2rem;color:#222}
table{border-collapse:collapse}td,th{padding:.2rem .6rem;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}h2{font-size:1.05rem;margin-top:1.6rem}
.trajectory{margin-bottom:1.2rem}.label{font:11px sans-serif;fill:#444}small{color:#666}"""


def load_timelines(folder: Path) -> list[dict]:
    """The per-trajectory results a replay wrote (``DIR/trajectories/<id>.json``)."""
    return [json.loads(path.read_text())
            for path in sorted((Path(folder) / "trajectories").glob("*.json"))]


def methods_svg(per_method: dict[str, list[int]], budget_tokens: int, title: str) -> str:
    """Each method's prompt tokens per step of one trajectory, with the budget line."""
    width, height = 760, 240
    plot_width, plot_height = width - LEFT - RIGHT, height - TOP - BOTTOM
    steps = max((len(tokens) for tokens in per_method.values()), default=1) or 1
    top = max([budget_tokens] + [t for tokens in per_method.values() for t in tokens]) * 1.08

    def point(index: int, tokens: int) -> str:
        return f"{LEFT + plot_width * (index + 0.5) / steps:.1f},{TOP + plot_height * (1 - tokens / top):.1f}"

    budget_y = TOP + plot_height * (1 - budget_tokens / top)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="arc-methods" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
             f'<text class="label" x="{LEFT}" y="16">{escape(title)}: prompt tokens per step</text>',
             f'<line x1="{LEFT}" y1="{budget_y:.1f}" x2="{width - RIGHT}" y2="{budget_y:.1f}" '
             f'stroke="#c0392b" stroke-dasharray="6 4"><title>window {budget_tokens:,}</title></line>',
             f'<text class="label" x="{LEFT - 6}" y="{budget_y + 4:.1f}" text-anchor="end">{budget_tokens:,}</text>']
    for index, (method, tokens) in enumerate(per_method.items()):
        colour = COLOURS[index % len(COLOURS)]
        line = " ".join(point(i, t) for i, t in enumerate(tokens))
        parts.append(f'<polyline class="method" data-method="{escape(method)}" points="{line}" '
                     f'fill="none" stroke="{colour}" stroke-width="1.6"><title>{escape(method)}</title></polyline>')
        parts.append(f'<text class="label" x="{width - RIGHT - 150}" y="{TOP + 12 * index + 8}" '
                     f'fill="{colour}" style="fill:{colour}">{escape(method)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def methods_table(methods: list[dict]) -> str:
    rows = ["<table><thead><tr><th>method</th><th>steps</th><th>prompt tokens per step</th>"
            "<th>calls over the window</th><th>prefix-reusable share</th><th>recoverable exactly</th>"
            "</tr></thead><tbody>"]
    for summary in methods:
        rows.append(f"<tr><td>{escape(summary['method'])}</td><td>{summary['steps']}</td>"
                    f"<td>{summary['prompt_tokens_per_step']:,.0f}</td><td>{summary['over_budget_calls']}</td>"
                    f"<td>{100 * summary['prefix_reusable_share']:.0f}%</td>"
                    f"<td>{summary['exactly_recoverable']} / {summary['observations']}</td></tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


def write_report(out: Path, timelines: list[dict], summary: dict, methods: list[dict] | None = None) -> Path:
    """Write ``out/report.html``; returns its path."""
    budget = summary["budget_tokens"]
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<title>ARC replay report</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>ARC replay report</h1>",
             f"<p>{summary['trajectories']} trajectories, {summary['steps']} steps, budget L = "
             f"{budget:,} tokens; ARC: {summary['over_budget_calls']} calls over the budget, "
             f"{summary['exactly_recoverable']} / {summary['observations']} observations "
             "recoverable exactly.</p>"]
    if summary.get("skipped_trajectories"):
        parts.append("<p>Skipped: " + "; ".join(
            f"{escape(entry['id'])}: {escape(entry['reason'])}" for entry in summary["skipped_trajectories"]) + "</p>")
    if methods:
        parts.append("<h2>Methods side by side</h2>" + methods_table(methods))
        by_trajectory: dict[str, dict[str, list[int]]] = {}
        for method in methods:
            for trajectory in method.get("per_trajectory", []):
                by_trajectory.setdefault(trajectory["id"], {})[method["method"]] = trajectory["prompt_tokens"]
        for trajectory_id, per_method in by_trajectory.items():
            parts.append(f'<div class="trajectory">{methods_svg(per_method, budget, trajectory_id)}</div>')
    parts.append("<h2>ARC's timeline per trajectory</h2><p><small>Per call: the conversation's "
                 "tokens (dashed grey: what the full context would take), the view's (blue), the "
                 "budget (red), the reusable prefix (green bars), compactions (orange).</small></p>")
    for trajectory in timelines:
        parts.append(f'<div class="trajectory" id="{escape(trajectory["id"])}">'
                     + timeline_svg(replay_points(trajectory["calls"]), budget,
                                    f"{trajectory['id']}: {len(trajectory['calls'])} calls, "
                                    f"{trajectory['compactions']} compactions") + "</div>")
    parts.append("</body></html>")
    path = Path(out) / "report.html"
    path.write_text("\n".join(parts))
    return path


if __name__ == "__main__":
    import sys

    folder = Path(sys.argv[1])
    print(write_report(folder, load_timelines(folder), json.loads((folder / "summary.json").read_text())))
