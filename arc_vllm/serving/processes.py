"""Process helpers shared by the server's launchers: a free TCP port, and a child that dies
with its parent. A leaf module (standard library only), so that the plugin, the Ray front and
its replicas, and the test harness (``serving.local``) import it without importing each other.

    port = free_port()
    subprocess.Popen(command, preexec_fn=die_with_parent)
"""

from __future__ import annotations

import ctypes
import signal
import socket

PR_SET_PDEATHSIG = 1
# Set in a Ray replica's engine: every vLLM process of it (the API server, EngineCore,
# workers; each loads the general plugin) dies with its parent, so a replica killed with
# SIGKILL takes its whole engine with it.
DIE_WITH_PARENT = "ARC_VLLM_DIE_WITH_PARENT"
# Set in a Ray replica's engine: the replica's name, which ARC responses carry as
# ``arc.replica``.
REPLICA = "ARC_VLLM_REPLICA"


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the caller binds it next; a race is possible but rare)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def die_with_parent(signal_number: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signal_number`` to this process when its parent exits (for a
    ``preexec_fn``, or called early in a child that must not outlive its parent)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal_number)
