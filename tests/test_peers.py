"""The peers' context managers pinned on small histories worked out by hand: what each
masks or forgets, and when (SWE-agent's LastNObservations and ClosedWindow, OpenHands'
ObservationMasking, ConversationWindow and RecentEvents condensers)."""

import pytest

from arc_vllm.policies import PEERS, make_policy
from arc_vllm.policies.base import ContextOverflow


def shown(policy):
    """The observation shown for each step still in the prompt (after 'Observation:\\n')."""
    return [m["content"].split("\n", 1)[1] for m in policy.render()[2:] if m["role"] == "user"]


def fed(name, observations, **options):
    from arc_vllm.policies import POLICIES

    policy = POLICIES[name](None, 10_000, task="Fix it.", **options)
    for number, observation in enumerate(observations):
        policy.observe(f"cmd {number}", observation)
    return policy


def test_swe_agent_last_n_masks_all_but_the_last_n_in_jumps_of_polling():
    policy = fed("swe_agent_last_n", ["a\nb\n", "c\n", "d\n", "e\n", "f\n"], n=2)
    assert shown(policy) == ["Old environment output: (2 lines omitted)",
                             "Old environment output: (1 lines omitted)",
                             "Old environment output: (1 lines omitted)", "e\n", "f\n"]
    assert policy.recoverable() == 2
    # polling=3: the masked count moves in jumps of 3, so 2 to 4 observations stay whole.
    counts = []
    policy = fed("swe_agent_last_n", [], n=2, polling=3)
    for number in range(8):
        policy.observe(f"cmd {number}", f"out {number}\n")
        counts.append(sum(1 for text in shown(policy) if text.startswith("out")))
    assert counts == [1, 2, 3, 4, 2, 3, 4, 2]


def test_swe_agent_last_n_masks_what_swe_agent_masks_for_any_polling():
    """SWE-agent's rule, stated over its own history (the instance template is observation 0
    and is never elided): after T steps it omits observations 1 .. ((T+1)//p)*p - n - 1."""
    for n in (1, 2, 5):
        for polling in (1, 2, 3):
            policy = fed("swe_agent_last_n", [], n=n, polling=polling)
            for steps in range(1, 16):
                policy.observe(f"cmd {steps}", f"out {steps}\n")
                template_and_steps = steps + 1
                last_removed = max(0, template_and_steps // polling * polling - n)
                omitted = set(range(1, max(1, last_removed)))  # in SWE-agent's numbering
                ours = {index + 1 for index, text in enumerate(shown(policy)) if not text.startswith("out")}
                assert ours == omitted, (n, polling, steps)


def test_swe_agent_closed_window_replaces_windows_of_files_shown_again():
    windows = ["[File: a.py (3 lines total)]\n1\n2\n", "[File: b.py (9 lines total)]\n1\n",
               "[File: a.py (3 lines total)]\n2\n3\n", "ran the tests\n", "[File: b.py (9 lines total)]\n5\n"]
    policy = fed("swe_agent_closed_window", windows)
    assert shown(policy) == ["Outdated window with 3 lines omitted...",
                             "Outdated window with 2 lines omitted...", windows[2], windows[3], windows[4]]
    assert policy.recoverable() == 3


def test_openhands_masking_keeps_observations_among_the_last_events():
    policy = fed("openhands_masking", ["o0", "o1", "o2", "o3"])   # 8 events; window 5
    assert shown(policy) == ["<MASKED>", "o1", "o2", "o3"]
    policy.observe("cmd 4", "o4")                                  # 10 events
    assert shown(policy) == ["<MASKED>", "<MASKED>", "o2", "o3", "o4"]
    assert fed("openhands_masking", ["o0", "o1"], attention_window=1).render()[-1]["content"].endswith("o1")


def test_openhands_window_halves_the_history_on_each_overflow_only():
    policy = fed("openhands_window", [f"o{n}" for n in range(6)])
    assert shown(policy) == [f"o{n}" for n in range(6)]    # nothing forgotten before an overflow
    policy.on_overflow("too long")
    assert shown(policy) == ["o3", "o4", "o5"]
    policy.on_overflow("too long")
    assert shown(policy) == ["o4", "o5"]
    policy.on_overflow("too long")
    assert shown(policy) == ["o5"]
    with pytest.raises(ContextOverflow):
        policy.on_overflow("too long")


def test_openhands_recent_keeps_the_first_and_the_last_events():
    policy = fed("openhands_recent", [f"o{n}" for n in range(6)])   # keep_first 1, max 10
    assert shown(policy) == ["o2", "o3", "o4", "o5"]               # the last 8 events
    policy = fed("openhands_recent", [f"o{n}" for n in range(6)], keep_first=3, max_events=9)
    assert shown(policy) == ["o0", "o3", "o4", "o5"]               # 2 events first, 6 last


def test_on_niah_no_peer_keeps_the_needle_read_first(smol):
    """The paper's NIAH (needle read first, then 8 files): the maskers have masked it, the
    windows have forgotten it (or overflow first), and the closed window (no file is
    re-opened) keeps everything until it overflows, with no answer to that."""
    from arc_vllm.agent.loop import run_episode
    from arc_vllm.evaluation.niah import make_task
    from arc_vllm.evaluation.scripted import ScriptedAgent

    outcomes = {}
    for name in PEERS:
        task = make_task(42, 0)
        policy = make_policy(name, smol, 3584, task=task.prompt)
        result = run_episode(policy, task, ScriptedAgent(), smol, 3584, force=(5, 10, 15))
        assert result["method"] == name and result["calls"] >= 1 and not result["passed"]
        outcomes[name] = result
    assert outcomes["swe_agent_closed_window"]["crashed"]
