"""The test run's server plan (``tests/helpers/server_plan.py``) keeps servers and a test's own
processes within the machine's memory: the CI run that the kernel killed (four servers beside
two class runs' engines) is the first case here. Items are stand-ins with what the plan reads of
a collected test: its node id, its fixtures, its marks.

    pytest tests/test_server_plan.py
"""

import pytest

from tests.helpers.server_plan import LOOKAHEAD, SERVER_GB, ServerPlan, server_gb


class Item:
    def __init__(self, nodeid: str, *servers: str, memory: float | None = None):
        self.nodeid = nodeid
        self.fixturenames = [f"{kind}_server" for kind in servers]
        self.marks = [pytest.mark.memory(memory).mark] if memory else []

    def iter_markers(self, name: str):
        return (mark for mark in self.marks if mark.name == name)


BUDGET = 17.6  # 24 GB less pytest's 4 and a 2 GB reserve


def test_before_a_test_that_needs_room_the_idle_server_used_furthest_ahead_stops():
    items = [Item("tests/test_callers.py::a", "arc", "plain", "keyed", "gateway"),
             Item("tests/test_cpu_builds.py::b", memory=8),
             Item("tests/test_hostile_input.py::c", "arc", "keyed"),
             Item("tests/test_inspector.py::d", "gateway"),
             Item("tests/test_plugin.py::e", "plain")]
    plan = ServerPlan(items, BUDGET)
    running = ["arc", "plain", "keyed", "gateway"]
    assert 4 * SERVER_GB + 8 > BUDGET  # what the kernel's OOM killer met
    assert plan.to_stop(1, running) == ["plain"]  # next used last, at e
    assert plan.to_stop(2, running) == []  # c holds no processes of its own: all four fit


def test_smollm2s_server_counts_what_it_holds():
    assert server_gb("smol") > 2 * server_gb("arc") and server_gb("arc") == SERVER_GB
    items = [Item("tests/test_ray_serve.py::a", memory=8), Item("tests/test_real_clients.py::b", "smol")]
    plan = ServerPlan(items, BUDGET)
    assert not plan.fits("smol", 0, running=["arc", "plain"])  # not ahead beside the Ray cluster
    assert plan.fits("smol", 1, running=["arc", "plain"])  # once it is gone


def test_a_server_the_test_or_its_module_uses_later_is_never_stopped_for_room():
    items = [Item("tests/test_ray_serve.py::a", "arc", memory=8),
             Item("tests/test_ray_serve.py::b", "plain", memory=8),
             Item("tests/test_ray_serve.py::c", "plain", "smol")]
    plan = ServerPlan(items, BUDGET)
    # At a: arc is a's own, plain and smol are used later in the same module (its fixtures may
    # hold their addresses), so nothing may stop, and a runs over the budget rather than break.
    assert plan.to_stop(0, ["arc", "plain", "smol"]) == []


def test_a_server_starts_ahead_only_where_it_fits_until_its_first_use():
    items = [Item("tests/test_a.py::a"),
             Item("tests/test_b.py::b", "keyed"),
             Item("tests/test_c.py::c", memory=9),
             Item("tests/test_d.py::d", "gateway")]
    plan = ServerPlan(items, BUDGET)
    # Two servers run: a third fits beside a's and b's processes, not beside c's 9 GB.
    assert plan.fits("keyed", 0, running=["arc", "plain"])
    assert not plan.fits("gateway", 0, running=["arc", "plain"])
    assert plan.fits("gateway", 0, running=["arc"])  # with one fewer, it does
    assert not plan.fits("gateway", 0, running=["smol"])  # SmolLM2's server holds more than two
    assert not plan.fits("plain", 0, running=[])  # no test of the run uses it


def quick(module: str, count: int) -> list[Item]:
    """``count`` tests of ``module`` that use no server: the quick ones between two users."""
    return [Item(f"tests/{module}::q{n}") for n in range(count)]


def test_a_server_displaces_idle_ones_not_needed_within_the_lookahead():
    items = [Item("tests/test_ray_bench.py::a", "arc", "plain"),
             Item("tests/test_ray_serve.py::b", memory=9),
             Item("tests/test_real_clients.py::c", "smol", memory=3),
             *quick("test_recall.py", LOOKAHEAD),
             Item("tests/test_redis.py::d", "arc"),
             *quick("test_replay.py", 10),
             Item("tests/test_serving.py::e", "plain", "smol")]
    plan = ServerPlan(items, BUDGET)
    running = ["arc", "plain"]
    assert not plan.fits("smol", 1, running)  # beside the Ray cluster and the two tiny servers
    # Both tiny servers are next needed beyond the lookahead: plain last, so it goes first, and
    # then arc, since SmolLM2's 7 GB and the cluster's 9 leave no room for a 3 GB server.
    assert plan.to_displace("smol", 1, running) == ["plain", "arc"]
    assert plan.fits("arc", 2, ["smol"])  # once the cluster is gone, arc starts ahead of d again
    # The displacer is needed before either comes back: neither displaces it.
    assert plan.to_displace("arc", 1, ["smol"]) is None


def test_nothing_needed_soon_in_the_current_module_or_with_the_displacer_is_displaced():
    items = [Item("tests/test_ray_serve.py::a", "arc", memory=9),
             *quick("test_ray_serve.py", 10),
             Item("tests/test_ray_serve.py::b", "arc", memory=9),
             Item("tests/test_real_clients.py::c", "smol", "plain")]
    plan = ServerPlan(items, BUDGET)
    assert plan.to_displace("smol", 1, ["arc"]) is None  # the module's own, for b
    assert plan.to_displace("smol", 1, ["plain"]) is None  # needed with smol


@pytest.mark.parametrize("between", [30, LOOKAHEAD])
def test_an_idle_server_needed_within_the_lookahead_is_not_displaced(between):
    items = [Item("tests/test_ray_serve.py::a", memory=9),
             Item("tests/test_real_clients.py::b", "smol"),
             *quick("test_recall.py", between),
             Item("tests/test_serving.py::c", "durable")]
    plan = ServerPlan(items, BUDGET)
    # Stopped 30 tests before its use, durable would start again at once (SmolLM2's server,
    # displaced so, started again 60 tests later); beyond the lookahead it has time to.
    assert plan.to_displace("smol", 0, ["durable"]) == (None if between < LOOKAHEAD else ["durable"])
