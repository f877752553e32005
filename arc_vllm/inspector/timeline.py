"""The timeline of a session or a replayed trajectory, as one SVG: per request (or call), the
conversation's tokens (what plain vLLM would have had to take) against the view's tokens and
the budget line, compactions and recalls marked, the prefix-cached share shaded.

    svg = timeline_svg(points, budget_tokens)

A point is a dict with ``conversation_tokens``, ``view_tokens``, ``prefix_cached_tokens``,
``compactions`` and ``recalls`` (a session's request records have exactly these fields;
``replay_points`` maps a replayed trajectory's calls onto them). The inspector page shows the
SVG the server draws here, and the replay report inlines it, so both draw it one way.
Each request is one ``circle.point``; compactions are ``path.compaction`` triangles, recalls
``rect.recall`` squares, the cached share ``rect.cached`` bars.

Run ``python -m arc_vllm.inspector.timeline > timeline.svg`` for an example.
"""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 760, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 40


def timeline_svg(points: list[dict], budget_tokens: int, title: str = "") -> str:
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = max(1, len(points))
    top = max([budget_tokens] + [point["conversation_tokens"] for point in points]
              + [point["view_tokens"] for point in points]) * 1.08 or 1
    step = plot_width / count

    def x(index: int) -> float:
        return LEFT + step * (index + 0.5)

    def y(tokens: float) -> float:
        return TOP + plot_height * (1 - tokens / top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="arc-timeline" viewBox="0 0 {WIDTH} '
             f'{HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{escape(title or "timeline")}">',
             '<style>.axis{stroke:#888;stroke-width:1}.label{font:11px sans-serif;fill:#444}'
             '.conversation{fill:none;stroke:#999;stroke-width:1.5;stroke-dasharray:4 3}'
             '.view{fill:none;stroke:#1f5fbf;stroke-width:2}.point{fill:#1f5fbf}'
             '.budget{stroke:#c0392b;stroke-width:1.5;stroke-dasharray:6 4}'
             '.cached{fill:#2e9e5b;opacity:.25}.compaction{fill:#e67e22}.recall{fill:#8e44ad}'
             '</style>']
    if title:
        parts.append(f'<text class="label" x="{LEFT}" y="16">{escape(title)}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_height}" x2="{WIDTH - RIGHT}" '
                 f'y2="{TOP + plot_height}"/><line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" '
                 f'y2="{TOP + plot_height}"/>')
    for fraction in (0, 0.5, 1):
        tokens = int(top * fraction)
        parts.append(f'<text class="label" x="{LEFT - 6}" y="{y(tokens) + 4:.1f}" '
                     f'text-anchor="end">{tokens:,}</text>')
    parts.append(f'<text class="label" x="{LEFT + plot_width / 2}" y="{HEIGHT - 8}" '
                 f'text-anchor="middle">request (1 to {len(points)}); tokens</text>')
    for index, point in enumerate(points):  # the cached share first, under the lines
        cached = min(point.get("prefix_cached_tokens") or 0, point["view_tokens"])
        parts.append(f'<rect class="cached" x="{x(index) - step * 0.35:.1f}" y="{y(cached):.1f}" '
                     f'width="{step * 0.7:.1f}" height="{y(0) - y(cached):.1f}"/>')
    parts.append(f'<line class="budget" x1="{LEFT}" y1="{y(budget_tokens):.1f}" x2="{WIDTH - RIGHT}" '
                 f'y2="{y(budget_tokens):.1f}"><title>budget {budget_tokens:,} tokens</title></line>')
    for name, key in (("conversation", "conversation_tokens"), ("view", "view_tokens")):
        line = " ".join(f"{x(i):.1f},{y(point[key]):.1f}" for i, point in enumerate(points))
        parts.append(f'<polyline class="{name}" points="{line}"/>')
    for index, point in enumerate(points):
        px, py = x(index), y(point["view_tokens"])
        parts.append(
            f'<circle class="point" data-index="{index + 1}" cx="{px:.1f}" cy="{py:.1f}" r="3">'
            f'<title>request {index + 1}: view {point["view_tokens"]:,} of {budget_tokens:,} tokens; '
            f'conversation {point["conversation_tokens"]:,}; prefix-cached '
            f'{point.get("prefix_cached_tokens") or 0:,}; compactions {point.get("compactions", 0)}; '
            f'recalls {point.get("recalls", 0)}</title></circle>')
        if point.get("compactions"):
            parts.append(f'<path class="compaction" d="M{px:.1f},{py - 12:.1f} l-5,-8 h10 z">'
                         f'<title>{point["compactions"]} compaction(s)</title></path>')
        if point.get("recalls"):
            parts.append(f'<rect class="recall" x="{px - 4:.1f}" y="{y(0) - 10:.1f}" width="8" '
                         f'height="8"><title>{point["recalls"]} recall(s)</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def replay_points(calls: list[dict]) -> list[dict]:
    """A replayed trajectory's calls (``DIR/trajectories/<id>.json``) as timeline points."""
    return [{"conversation_tokens": call["full_context_tokens"], "view_tokens": call["prompt_tokens"],
             "prefix_cached_tokens": call.get("prefix_reusable_tokens", 0),
             "compactions": int(bool(call.get("compacted"))), "recalls": call.get("recalls", 0)}
            for call in calls]


if __name__ == "__main__":
    example = [{"conversation_tokens": 900 * n, "view_tokens": min(900 * n, 3000 - 200 * (n % 3)),
                "prefix_cached_tokens": 600 * n if n < 4 else 1500, "compactions": int(n >= 4),
                "recalls": int(n == 6)} for n in range(1, 9)]
    print(timeline_svg(example, 3584, "example"))
