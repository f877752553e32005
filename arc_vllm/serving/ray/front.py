"""``arc-vllm serve --ray-replicas N [--ray-address ADDRESS] [--ray-routing affinity|round-robin]
[MODEL] [--arc-...] [vllm options]``: ARC sessions over N engine replicas with Ray Serve.

Each replica (``serving.ray.replica``) runs ``arc-vllm serve`` with the same options over one
shared store: ``--arc-store redis://...`` where given (any replica on any node serves any
session), else a folder (``--arc-store-dir``, a temporary one unless given) with
``--arc-shared-sessions``. The
front is the same HTTP surface as ``arc-vllm serve``. A request that names a session
(``vllm_xargs.arc_session``, ``X-ARC-Session`` or the ``/v1/arc/sessions/{sid}`` path), or a
chat request in an implicit session (by its conversation), is assigned a replica by Ray's
``ConsistentHashRouter`` on that key, once; the front remembers the choice (and, from the
``X-ARC-Session`` of its answers, the session an implicit request was served in) and sends the
session's requests straight to that replica's engine over HTTP, so a session's requests reach
one replica and its prefix-cached KV without a Ray call each (``--ray-routing round-robin``
asks Ray on every request and spreads them, to measure what affinity keeps). When a replica
dies, its in-flight requests answer 503, its sessions are assigned again by Ray and continue
on another replica from the shared store; Ray Serve starts a replacement.

Without ``--ray-address`` the cluster is local and runs in a loopback-only network namespace
(``arc_vllm.ray_cluster``); this process binds ``--host``:``--port`` (127.0.0.1 by default)
and hands the listening socket to the front inside (a socket keeps the namespace it was made
in), so a request reaches the front with no relay in between. With ``--ray-address`` (a
cluster you run) the front listens on ``--host``:``--port`` itself, each replica's engine on
its node's address, and the store must be one every node reaches: ``--arc-store redis://HOST:PORT``
(or a folder on a filesystem every node mounts). Affinity keeps a session's prefix-cached KV on
one replica; with Redis, correctness no longer depends on it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Not passed on: what the connection to the replica sets itself.
HOP_HEADERS = ("host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade")


@functools.cache
def api_of_path() -> dict[str, str]:
    """Which API each conversational route is: the server's adapters' own paths."""
    from arc_vllm.serving.routes import adapters

    chat, others, compact = adapters()
    return {path: api.name for api in (chat, *others, compact) for path in api.paths}


def session_of(path: str, headers, body: bytes) -> str | None:
    """The routing key of a request: the ARC session its path names (``/v1/arc/sessions/{sid}``),
    else the server's own keys of its body and headers (``conversation_index.routing_key``), so
    that every request of one session or conversation reaches the same replica."""
    parts = path.strip("/").split("/")
    if parts[:3] == ["v1", "arc", "sessions"] and len(parts) > 3:
        return parts[3]
    from arc_vllm.serving.sessions.conversation_index import routing_key

    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    return routing_key(api_of_path().get("/" + "/".join(parts)), dict(headers), data)


class Front:
    """The HTTP front (ASGI): every route of ``arc-vllm serve``. Ray's router picks the replica
    of a request's session (with affinity once per session, the choice then remembered; with
    round-robin on every request), and the request goes to that replica's engine over HTTP,
    streamed back as the engine sends it (a streamed chat answer arrives event by event)."""

    def __init__(self, replicas, routing: str):
        import httpx
        from cachetools import LRUCache

        self.replicas, self.routing = replicas, routing
        self.client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None,
                                                                          max_keepalive_connections=512))
        # Session -> its engine's URL, as Ray's router chose it. Dropped when that engine cannot
        # be reached, so the next request asks Ray again (its replacement, or another replica).
        self.chosen: LRUCache = LRUCache(maxsize=65536)

    async def engine_for(self, sid: str | None, fresh: bool = False) -> str:
        """The URL of the engine serving ``sid`` (asked of Ray, or as remembered)."""
        affinity = self.routing == "affinity"
        if affinity and not fresh and sid in self.chosen:
            return self.chosen[sid]
        handle = self.replicas.options(session_id=sid) if sid and affinity else self.replicas
        _, url = await handle.address.remote()
        if affinity:
            self.chosen[sid] = url
        return url

    async def forward(self, request, body: bytes, sid: str | None, receive):
        """The replica's answer (its headers; the body still to stream), asked again of Ray once
        where the engine it had is gone. A client that leaves before the replica's headers (a
        whole answer's wait) closes the call, so the replica cancels the request in turn."""
        import httpx

        from arc_vllm.serving.api_route import cancelled_on_disconnect

        headers = {key: value for key, value in request.headers.items() if key not in HOP_HEADERS}

        async def send(url: str):
            return url, await self.client.send(self.client.build_request(
                request.method, url + request.url.path, params=request.url.query, headers=headers,
                content=body), stream=True)

        try:
            return await cancelled_on_disconnect(send(await self.engine_for(sid)), receive)
        except httpx.ConnectError:  # that engine is gone and nothing was sent: ask Ray again
            self.chosen.pop(sid, None)
            return await cancelled_on_disconnect(send(await self.engine_for(sid, fresh=True)), receive)

    def relayed(self, answer, sid: str | None):
        """The replica's answer, streamed to the client as it comes."""
        import httpx
        from starlette.responses import StreamingResponse

        async def pieces():
            try:
                async for piece in answer.aiter_raw():
                    yield piece
            except httpx.TransportError:  # lost mid-answer: the status is sent, the stream ends
                self.chosen.pop(sid, None)
            finally:
                await answer.aclose()

        return StreamingResponse(pieces(), answer.status_code, media_type=answer.headers.get("content-type"),
                                 headers={key: value for key, value in answer.headers.items()
                                          if key == "x-arc-session"})

    async def __call__(self, scope, receive, send):
        import httpx
        from ray.exceptions import RayError
        from starlette.requests import Request
        from starlette.responses import JSONResponse

        from arc_vllm.serving.errors import ClientGone, openai_error

        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        body = await request.body()
        sid = session_of(request.url.path, request.headers, body)
        try:
            url, answer = await self.forward(request, body, sid, receive)
        except ClientGone:
            return  # nobody to answer
        except (httpx.TransportError, RayError) as error:  # the replica was lost under it
            self.chosen.pop(sid, None)
            response = JSONResponse(openai_error(
                f"the engine replica serving this request was lost ({type(error).__name__}); "
                "retry it: the session continues on another replica", 503, "replica_lost"), 503)
        else:
            served = answer.headers.get("x-arc-session")
            if self.routing == "affinity" and served and served != sid:
                # The session an implicit request was served in is where the requests that
                # name it go too (a previous_response_id, an explicit X-ARC-Session): one
                # replica, one KV cache, whichever key a request of the conversation carries.
                self.chosen[served] = url
            response = self.relayed(answer, sid)
        await response(scope, receive, send)


def deploy(serve_arguments: list[str], replicas: int, routing: str, log_dir: str):
    from ray import serve
    from ray.serve.config import RequestRouterConfig

    from arc_vllm.serving.ray.replica import EngineReplica

    if routing == "affinity":
        from ray.serve.experimental.consistent_hash_router import ConsistentHashRouter as router
        kwargs = {"num_fallback_replicas": max(0, replicas - 1)}
    else:
        from ray.serve.experimental.round_robin_router import RoundRobinRouter as router
        kwargs = {}
    serve.start(proxy_location="Disabled")
    deployment = serve.deployment(EngineReplica).options(
        name="engine", num_replicas=replicas, ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=256, health_check_period_s=2, health_check_timeout_s=30,
        graceful_shutdown_timeout_s=10,
        request_router_config=RequestRouterConfig(request_router_class=router,
                                                  request_router_kwargs=kwargs))
    try:
        return serve.run(deployment.bind(serve_arguments, log_dir), name="arc", route_prefix=None)
    except RuntimeError as error:
        # Serve's own error names only the deployment; why its replicas failed (each one's
        # exception, with its engine's last log lines) is in the deployment's status.
        deployments = serve.status().applications.get("arc")
        reason = deployments.deployments["engine"].message if deployments else ""
        raise RuntimeError(f"{error}\n{reason}") from error


def inner_main(argv: list[str]) -> int:
    """The cluster side: Ray, the replicas and the front (on ``--uds`` or ``--host/--port``)."""
    parser = argparse.ArgumentParser(prog="arc-vllm serve --ray-replicas (cluster side)")
    parser.add_argument("--ray-replicas", type=int, required=True)
    parser.add_argument("--ray-address", default="local")
    parser.add_argument("--ray-routing", choices=("affinity", "round-robin"), default="affinity")
    parser.add_argument("--fd", type=int, default=None,
                        help="a listening socket inherited from outside the namespace")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-dir", required=True)
    args, serve_arguments = parser.parse_known_args(argv)
    import uvicorn

    from arc_vllm.ray_cluster import start

    from ray import serve

    start(args.ray_address)
    try:
        replicas = deploy(serve_arguments, args.ray_replicas, args.ray_routing, args.log_dir)
        app = Front(replicas, args.ray_routing)
        if args.fd is not None:
            import socket

            config = uvicorn.Config(app, log_level="warning")
            uvicorn.Server(config).run(sockets=[socket.socket(fileno=args.fd)])
        else:
            uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:  # the replicas and their engines go with the front, in bounded time
        import threading

        import ray

        stopping = threading.Thread(target=serve.shutdown, daemon=True)
        stopping.start()
        stopping.join(timeout=20)
        ray.shutdown()
        from arc_vllm.ray_cluster import LOCAL, kill_session

        if args.ray_address == LOCAL:
            kill_session(os.getsid(0))  # this cluster's session: whatever did not stop
    return 0


def main(argv: list[str]) -> int:
    """``arc-vllm serve --ray-replicas N ...`` as typed (see the module docstring). The front
    takes the Ray options and ``--host``/``--port``; every other argument is each replica's
    ``arc-vllm serve`` (which resolves the model and ARC's defaults itself, as typed)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--ray-replicas", type=int, required=True)
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--ray-routing", choices=("affinity", "round-robin"), default="affinity")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, rest = parser.parse_known_args(argv)
    if args.ray_replicas < 1:
        raise SystemExit("--ray-replicas: at least 1")
    work = Path(tempfile.mkdtemp(prefix="arc-vllm-ray-"))
    rest = replica_arguments(rest, args.ray_address, work)
    inner = [sys.executable, "-m", "arc_vllm.serving.ray.front", "--ray-replicas", str(args.ray_replicas),
             "--ray-routing", args.ray_routing, "--log-dir", str(work / "logs")]
    print(f"arc-vllm: {args.ray_replicas} replicas starting; serving on http://{args.host}:{args.port} "
          f"(logs in {work / 'logs'})", file=sys.stderr, flush=True)
    if args.ray_address:
        code = waited(subprocess.Popen(inner + ["--ray-address", args.ray_address, "--host", args.host,
                                                "--port", str(args.port), *rest]))
    else:
        code = local_cluster(inner + rest, args.host, args.port)
    return removed(work, code)


def replica_arguments(rest: list[str], ray_address: str | None, work: Path) -> list[str]:
    """Each replica's ``arc-vllm serve`` arguments: the ones typed, checked against where the
    cluster runs, and a store every replica shares (a folder of ``work`` on the local cluster)."""
    from arc_vllm.serving.serve_arguments import given

    local_redis = any(arg.startswith(("redis://127.", "redis://localhost", "rediss://127.", "rediss://localhost"))
                      for arg in rest)
    if local_redis and not ray_address:
        raise SystemExit("--arc-store: the local cluster runs in a network namespace of its own, whose "
                         "loopback is not this machine's; give the Redis's unix socket (--arc-store "
                         "unix:///path/redis.sock) or a Redis on another address")
    if not given(rest, "--arc-store-dir") and not given(rest, "--arc-store"):
        if ray_address:
            raise SystemExit("--ray-address: give --arc-store redis://HOST:PORT (a Redis every node "
                             "reaches; or a folder on a filesystem every node reaches)")
        rest += ["--arc-store-dir", str(work / "sessions")]
    if not given(rest, "--arc-shared-sessions"):
        rest += ["--arc-shared-sessions"]  # a folder's processes share it (Redis always is)
    return rest


def local_cluster(command: list[str], host: str, port: int) -> int:
    """Run ``command`` (the cluster side) in a loopback-only network namespace of its own, on a
    socket listening on ``host:port`` out here; its exit code."""
    import socket

    from arc_vllm.ray_cluster import isolated_command, isolated_environment
    from arc_vllm.serving.processes import die_with_parent

    listener = socket.create_server((host, port), backlog=2048)
    listener.set_inheritable(True)
    # Its own session (so that it can be taken down whole), and SIGTERM if this process dies.
    cluster = subprocess.Popen(
        isolated_command(command + ["--fd", str(listener.fileno())]),
        env=isolated_environment(), start_new_session=True, pass_fds=(listener.fileno(),),
        preexec_fn=lambda: die_with_parent(15))
    listener.close()  # the front holds it now
    try:
        return waited(cluster)
    finally:
        from arc_vllm.ray_cluster import kill_session

        kill_session(cluster.pid)  # the cluster's own session: anything still left of it


def waited(child: subprocess.Popen) -> int:
    """The exit code of ``child`` (the side that serves), or 0 when this process is stopped by
    Ctrl-C or SIGTERM, as a server is; ``child`` is stopped with it (SIGTERM, then SIGKILL after
    60 s). A SIGTERM used to end this process where it stood: the child (``--ray-address``) kept
    serving, and the run's folder stayed in /tmp."""
    import signal

    def interrupted(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        return child.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        child.terminate()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()


def removed(work: Path, code: int) -> int:
    """This run's temporary folder (its sessions, its replicas' logs) goes with it, unless the
    run failed: then its logs are kept, and said where."""
    import shutil

    if code == 0:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"arc-vllm: exit {code}; the replicas' logs are in {work / 'logs'}", file=sys.stderr)
    return code


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()
    sys.exit(inner_main(sys.argv[1:]))
