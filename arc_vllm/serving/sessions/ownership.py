"""Whose sessions: who a request is, and which sessions it may continue and read.

A caller is its API key (vLLM's ``--api-key`` takes several: one per tenant) or, behind a
gateway that authenticates callers, the header the gateway sets (``--arc-caller-header
NAME``: both, where both are used), optionally narrowed by the end user the client asserts
(the body's ``user`` / ``safety_identifier``, Anthropic's ``metadata.user_id``). Where callers are checked (``--api-key`` or
``--arc-caller-header``) a session belongs to its maker (``Session.tenant`` and
``Session.user``, stored with it, so this holds across restarts and replicas):

- only its caller continues it, by any name (``X-ARC-Session``, ``vllm_xargs.arc_session``,
  ``previous_response_id``, a compaction handle), and with the same asserted end user;
- its key (tenant) reads it: the session routes, the inspector's, ``DELETE``; the listing shows
  a key its own sessions;
- ``--arc-admin-key`` reads and lists every session (never continues another's);
- anyone else gets the 404 of an unknown session: no oracle of existence.

Without either option nothing is checked (every route is open, as vLLM's are): ``asking`` is
None and ``SessionManager.using`` checks nothing; implicit sessions are still scoped by the
caller, so two callers never share one.

    callers = Callers.of(options, keys)   # once, at start: app.state.arc_callers
    callers.who(headers, body)             # the Who of a request (401 if the gateway's header is missing)
    asking(request, body)                  # the Who to check (None: nothing is checked)
    maker(request, body)                   # the Who a new session is recorded under (always)

Run ``python -m arc_vllm.serving.sessions.ownership`` for an example.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from arc_vllm.serving.sessions.conversation_keys import (caller_of, check_identifiers, checked_id, end_user_of,
                                                headers_of, key_of)
from arc_vllm.serving.errors import SessionError


@dataclass(frozen=True)
class Who:
    """Who a request is: ``caller`` (``caller_of``) scopes its implicit sessions; ``tenant``
    (the key, and the gateway's caller) owns the sessions it makes; ``user`` (the end user the
    body asserts, hashed; None: none asserted) narrows that; ``admin`` (``--arc-admin-key``)
    reads every session."""

    caller: str
    tenant: str
    user: str | None = None
    admin: bool = False


def digest(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Callers:
    """How this server tells its callers apart (its options, read once at start)."""

    checked: bool = False          # --api-key or --arc-caller-header: sessions belong to callers
    admin_key: str | None = None   # --arc-admin-key
    header: str | None = None      # --arc-caller-header, lower case

    @classmethod
    def of(cls, options, keys_checked: bool) -> Callers:
        """From the server's ``ServeOptions``."""
        header = options.caller_header.strip().lower() if options.caller_header else None
        return cls(keys_checked or header is not None, options.admin_key, header)

    def who(self, headers: dict[str, str], body=None) -> Who:
        """The Who of a request. Behind a gateway a request without its header did not come
        through it: a 401 (the operator's key excepted, which needs no gateway to read)."""
        check_identifiers(body)
        key = key_of(headers)
        admin = bool(self.admin_key) and hmac.compare_digest(key.encode("utf-8", "surrogatepass"),
                                                             self.admin_key.encode("utf-8", "surrogatepass"))
        gateway = None
        if self.header is not None:
            gateway = (headers.get(self.header) or "").strip()
            if not gateway and not admin:
                raise SessionError(f"this server takes its callers from the {self.header} header its "
                                   "gateway sets, and this request has none", 401)
            checked_id(self.header, gateway)
        tenant = digest("tenant", key) if gateway is None else digest("tenant", key, "gateway", gateway)
        asserted = end_user_of(body)
        user = digest("user", *asserted) if any(asserted) else None
        return Who(caller_of(headers, body, gateway), tenant, user, admin)


def callers_of(app) -> Callers:
    return getattr(app.state, "arc_callers", None) or Callers()


def maker(request, body=None) -> Who:
    """Who a new session belongs to, recorded whether or not callers are checked now."""
    return callers_of(request.app).who(headers_of(request.scope), body)


def asking(request, body=None) -> Who | None:
    """Who to check a session against: None where callers are not checked."""
    if not callers_of(request.app).checked:
        return None
    return maker(request, body)


def allows(tenant: str | None, user: str | None, who: Who, write: bool) -> bool:
    """Whether ``who`` may continue (``write``) or read a session made by ``tenant`` for
    ``user``: its caller continues it (the same end user asserted), its key reads it (a
    request asserting an end user only that user's), the operator's key reads every one. A
    session stored before sessions had an owner (``tenant`` None) is open, as it was then."""
    if (who.admin and not write) or tenant is None:
        return True
    if tenant != who.tenant:
        return False
    return user == who.user if write or who.user is not None else True


if __name__ == "__main__":
    callers = Callers(checked=True, admin_key="ops", header="x-caller")
    alice = callers.who({"authorization": "Bearer key-a", "x-caller": "team-1"}, {"user": "alice"})
    bob = callers.who({"authorization": "Bearer key-a", "x-caller": "team-1"}, {"user": "bob"})
    print("bob continues alice's:", allows(alice.tenant, alice.user, bob, write=True))
    print("the key reads it:", allows(alice.tenant, alice.user, callers.who(
        {"authorization": "Bearer key-a", "x-caller": "team-1"}), write=False))
