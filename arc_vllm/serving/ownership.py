"""Whose sessions: who a request is, as the session routes and the ARC route check it.

Under vLLM's ``--api-key`` (keys are checked) a session belongs to the key that made it
(``Session.tenant``): only that key continues and reads it, another key gets the 404 of an
unknown session, and ``--arc-admin-key`` reads every session. Without ``--api-key`` no key is
checked, so none owns anything: ``asking`` is None and ``SessionManager.using`` checks nothing.

    asking(request)              the Who to check (None: keys are not checked)
    maker(request, body)         the Who a new session is recorded under (always)

Run ``python -m arc_vllm.serving.ownership`` for an example.
"""

from __future__ import annotations

from arc_vllm.serving.conversation_keys import Who, headers_of, who_of


def maker(request, body=None) -> Who:
    """Who a new session belongs to, recorded whether or not keys are checked now."""
    return who_of(headers_of(request.scope), body, getattr(request.app.state, "arc_admin_key", None))


def asking(request, body=None) -> Who | None:
    """Who to check a session against: None without ``--api-key``."""
    if not getattr(request.app.state, "arc_keys_checked", False):
        return None
    return maker(request, body)


if __name__ == "__main__":
    from types import SimpleNamespace

    state = SimpleNamespace(arc_admin_key="ops", arc_keys_checked=True)
    request = SimpleNamespace(scope={"headers": [(b"authorization", b"Bearer key-a")]}, app=SimpleNamespace(state=state))
    print(asking(request))
