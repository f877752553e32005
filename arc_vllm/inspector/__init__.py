"""What the model saw, for people: the session inspector page (``vllm serve MODEL --arc
--arc-ui`` -> ``/v1/arc/ui``) and the replay report (``arc-vllm replay ... --html``).

    timeline.py  the timeline SVG: conversation tokens against view tokens and the budget
    page.py      the inspector's HTML shell (HTML, CSS and script inline; it carries no data)
    report.py    report.html of a replay: timelines and the methods side by side

A leaf: it imports nothing from serving or the agent, which import it.
"""
