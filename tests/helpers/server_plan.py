"""Which shared servers (``tests/helpers/servers.py``) a test run holds when: each starts up to
LOOKAHEAD tests before its first user and stops after its last, and servers plus the current
test's own processes are kept within the machine's memory. ``tests/conftest.py``'s hooks ask
this plan before and after each test; ``tests/test_server_plan.py`` checks its rules.

    plan = ServerPlan(session.items, budget_gb=machine_gb() - RUN_GB - RESERVE_GB)
    plan.to_stop(at, running)     # idle servers to stop before test ``at`` for room
    plan.fits(kind, at, running)  # may ``kind`` start now, ahead of its first use
    plan.to_displace(kind, at, running)  # or once these idle servers, needed later, stop
"""

from __future__ import annotations

import bisect

# Shared servers start some tests ahead of their first user and stop after their last: a start-up
# (tens of seconds of CPU, most of it importing vLLM) overlaps the tests before it, and the run
# holds only the servers in use. Many tests take well under a second, so 6 tests ahead left a
# start-up 0 to 2 s of lead where 40 leave 35 to 240 s; 40 leave the reasoning server, whose first
# users follow test_store.py's quick properties, 30 s (its module waits 43 s more, as the AVX2
# class). 80 started it in time but put start-ups beside the KV-reuse bench and the real clients,
# whose engines take both cores: each ran 30 to 50 s longer (ad24f37, as the AVX2 class; the whole
# run 2.5 minutes longer). Servers start ahead only while fewer than MAX_AHEAD start-ups are under
# way (each takes a core for about 20 s), however many run: counted as servers running, the
# callers' gateway server could not start ahead of its module while four others served the first
# modules. A test that measures time (``pytest.mark.quiet``) waits for the start-ups under way and
# none begins while it runs: the profiler's held-out cells, measured while a server started, were
# off by more than tenfold.
LOOKAHEAD = 40  # tests
MAX_AHEAD = 3  # start-ups under way
# Memory. A server holds about SERVER_GB (its API process and its engine's, most of it torch and
# vLLM; vLLM-CPU's KV cache is touched only as it fills), or what its kind says (``gb`` in
# ``KINDS``: SmolLM2's, 7: its engine held 5.6 GB from its start, its API process 0.9). A test
# module whose own processes hold more than a few hundred MB (engines side by side, the class
# runs, a Ray cluster, the clients) says how much with ``pytest.mark.memory(GB)``. Servers and the
# current test's processes are kept within the machine's memory less this process's (RUN_GB, its
# in-process engine included) and a reserve: a server starts ahead only where it fits until its
# first use, and a test that needs room first stops the idle servers whose next use is in a later
# module, furthest first (they start again ahead of it). A server that does not fit ahead of its
# first use may displace idle servers not needed within LOOKAHEAD tests (nor in the current
# module), furthest first, as a cache evicts what it needs last: a displaced server has time to
# start again ahead of its own use, and never displaces its displacer before that use, so nothing
# thrashes (with any idle server needed after the displacer's first use, SmolLM2's server was
# displaced and started again 60 tests later at a reach of 60). SmolLM2's server (7 GB) fitted
# neither beside the Ray cluster nor after it with time to start: the real clients waited 257 s
# for it where, started beside the cluster, they had waited 198 s. A CI run at 10efafd had the
# kernel kill pytest at test_cpu_builds: four servers (2.2 GB each), pytest (3.2 GB), and four
# engines (2.8 GB each) of two class runs side by side, on 24 GB.
SERVER_GB = 3.0
RUN_GB = 4.0
RESERVE_GB = 2.0


def machine_gb() -> float:
    """The machine's memory in GB (the profiler's own reading, ``arc_vllm/cost/calibrate.py``)."""
    from arc_vllm.cost.calibrate import memory_bytes

    return memory_bytes("cpu") / 2 ** 30


def kinds_of(item) -> set[str]:
    """The shared server kinds a collected test uses: its fixtures (those of its fixtures too),
    and the kinds named by ``pytest.mark.server(KIND)``, for a test that asks for its server
    by name (``request.getfixturevalue``), one per parameter."""
    from tests.helpers.servers import KINDS

    marked = {kind for mark in item.iter_markers("server") for kind in mark.args}
    return {kind for kind in KINDS if f"{kind}_server" in getattr(item, "fixturenames", ()) or kind in marked}


def server_gb(kind: str) -> float:
    """The GB a server of ``kind`` holds."""
    from tests.helpers.servers import KINDS

    return KINDS[kind].get("gb", SERVER_GB)


def memory_of(item) -> float:
    """The GB a test's own processes hold beside the servers (``pytest.mark.memory``)."""
    return max((mark.args[0] for mark in item.iter_markers("memory")), default=0.0)


class ServerPlan:
    """Which shared servers each test of the run uses, and the memory its own processes hold,
    in the run's order (after -k and -m)."""

    def __init__(self, items, budget_gb: float):
        self.index = {item: at for at, item in enumerate(items)}
        self.kinds = [kinds_of(item) for item in items]
        self.uses = {}  # kind -> the positions of the tests that use it, in order
        for at, kinds in enumerate(self.kinds):
            for kind in kinds:
                self.uses.setdefault(kind, []).append(at)
        self.memory = [memory_of(item) for item in items]
        self.module = [item.nodeid.split("::")[0] for item in items]
        self.last = {kind: uses[-1] for kind, uses in self.uses.items()}
        self.budget_gb = budget_gb  # for servers and a test's own processes

    @classmethod
    def of(cls, session) -> "ServerPlan":
        if getattr(session, "arc_server_plan", None) is None:
            session.arc_server_plan = cls(session.items, machine_gb() - RUN_GB - RESERVE_GB)
        return session.arc_server_plan

    def next_use(self, kind: str, at: int) -> int | None:
        uses = self.uses.get(kind, [])
        later = bisect.bisect_left(uses, at)
        return uses[later] if later < len(uses) else None

    def fits(self, kind: str, at: int, running: list[str]) -> bool:
        """Whether one more server, the ``kind`` started now for a test at most LOOKAHEAD
        ahead, fits beside the running ones and every test's processes until it is used."""
        first = self.next_use(kind, at)
        if first is None:
            return False
        held = sum(map(server_gb, running)) + server_gb(kind)
        return held + max(self.memory[at:first + 1]) <= self.budget_gb

    def to_stop(self, at: int, running: list[str]) -> list[str]:
        """The idle servers to stop before the test at ``at`` so that its processes fit: those
        next used in a later module, furthest first (``idle``), until what is left fits."""
        stopping, held = [], sum(map(server_gb, running)) + self.memory[at]
        for kind in self.idle(at, running, from_test=at):
            if held <= self.budget_gb:
                break
            stopping.append(kind)
            held -= server_gb(kind)
        return stopping

    def to_displace(self, kind: str, at: int, running: list[str]) -> list[str] | None:
        """The idle servers to stop now so that ``kind`` fits ahead of its first use: those
        not needed within LOOKAHEAD tests (so after that use, and with time to start again
        ahead of their own) nor later in the module of the test at ``at``, furthest first; None
        where even all of them leave no room (then nothing stops)."""
        if self.next_use(kind, at) is None:
            return None
        stopping, left = [], list(running)
        for other in self.idle(at, running, from_test=at + LOOKAHEAD):
            if self.fits(kind, at, left):
                break
            stopping.append(other)
            left.remove(other)
        return stopping if self.fits(kind, at, left) else None

    def idle(self, at: int, running: list[str], from_test: int) -> list[str]:
        """The running servers not needed before test ``from_test`` nor later in the module of
        the test at ``at`` (its fixtures may hold their addresses), furthest next use first."""
        never = len(self.kinds)
        later = []
        for kind in running:
            use = self.next_use(kind, at)
            use = never if use is None else use
            if use >= from_test and (use == never or self.module[use] != self.module[at]):
                later.append((use, kind))
        return [kind for _, kind in sorted(later, reverse=True)]
