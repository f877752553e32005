"""Compaction handles: the opaque part of every compaction ARC answers, one owner for their form.

When ARC answers a compaction (a client's own summary turn, ``POST /v1/responses/compact``, a
Responses ``compaction`` item, an Anthropic ``compaction`` block) the client keeps a handle in
place of its history: the ``encrypted_content`` of the item or block, or the last line of
ARC's handoff text (``[ARC handle arc1....]``). A later request carrying it continues the
session: ARC expands the history before it from the store, so the client sends only the
handle and what is new.

    arc1.<payload>.<signature>      payload: base64url JSON {s: session, n: messages it stands
                                    for, g: the session's rewrites then, c: the caller, k: the
                                    conversation's tokens then}
                                    signature: HMAC-SHA256 over the payload, 128 bits

The handle is authenticated, not encrypted: it holds no user text, only ids and counts. The
secret is ``--arc-secret``, else the one the session storage keeps for every process over it
(``SessionStorage.secret``: made once in a store folder, ``DIR/.arc-secret``, mode 0600, or in
Redis, so any replica reads a handle another issued), else one per process (a server without a
store keeps no session past its life either). A forged or altered handle fails the signature (400); another caller's is no session
of this caller's (404, the same answer as an unknown session: no oracle of existence).

Run ``python -m arc_vllm.serving.compaction.handle`` for an example.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import asdict, dataclass

from arc_vllm.serving.errors import SessionError

VERSION = "arc1"
HANDLE = re.compile(rf"{VERSION}\.([A-Za-z0-9_-]{{8,400}})\.([A-Za-z0-9_-]{{22}})")
CALLER_CHARS = 16


@dataclass(frozen=True)
class Handle:
    session: str
    position: int        # the session's messages the handle stands for (its fingerprints then)
    generation: int      # the session's rewrites (num_rebases) then
    caller: str          # who compacted (``conversation_keys.caller_of``, shortened)
    tokens: int = 0      # the conversation's size then, as ARC counts it

    def _payload(self) -> dict:
        return {"s": self.session, "n": self.position, "g": self.generation, "c": self.caller, "k": self.tokens}


def caller_tag(caller: str) -> str:
    """The part of a caller's hash a handle carries."""
    return caller[:CALLER_CHARS]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Handles:
    """Issues and reads handles under one secret."""

    def __init__(self, secret: bytes):
        if len(secret) < 16:
            raise ValueError("--arc-secret: at least 16 characters")
        self.key = hashlib.sha256(b"arc-vllm compaction handle\x1f" + secret).digest()

    @classmethod
    async def for_server(cls, secret: str | None, storage) -> "Handles":
        """``--arc-secret``, else the secret the session ``storage`` keeps (``SessionStorage.secret``)."""
        return cls(secret.encode("utf-8") if secret else await storage.secret())

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self.key, payload.encode("ascii"), hashlib.sha256).digest()[:16])

    def issue(self, handle: Handle) -> str:
        payload = _b64(json.dumps(handle._payload(), separators=(",", ":")).encode("utf-8"))
        return f"{VERSION}.{payload}.{self._sign(payload)}"

    def read(self, text: object, where: str = "compaction handle") -> Handle:
        """The handle ``text`` is; a ``SessionError`` (400) naming what is wrong otherwise."""
        match = HANDLE.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise SessionError(f"{where}: not a compaction handle ARC issued (expected {VERSION}.…)")
        payload, signature = match.groups()
        if not hmac.compare_digest(self._sign(payload), signature):
            raise SessionError(f"{where}: its signature does not verify: it was altered, or issued "
                               "by another server (another --arc-secret or store folder)")
        try:
            data = json.loads(_unb64(payload))
            return Handle(str(data["s"]), int(data["n"]), int(data["g"]), str(data["c"]), int(data.get("k", 0)))
        except (ValueError, KeyError, TypeError):
            raise SessionError(f"{where}: not a compaction handle ARC issued") from None

    def find(self, text: str) -> Handle | None:
        """The last handle in a text that verifies (the newest handoff a client kept), or None."""
        for match in reversed(list(HANDLE.finditer(text))):
            try:
                return self.read(match.group(0))
            except SessionError:
                continue
        return None

    @staticmethod
    def holds_text_handle(text: str) -> bool:
        return f"{VERSION}." in text


if __name__ == "__main__":
    handles = Handles(b"an example secret, not a real one")
    token = handles.issue(Handle("sess_0123456789abcdef01234567", 12, 0, caller_tag("ab" * 20)))
    print(token)
    print(handles.read(token))
    print(asdict(handles.find(f"... [ARC handle {token}]")))
    try:
        handles.read(token[:-2] + "AA")
    except SessionError as error:
        print(error.status, error)
