"""Sessions in Redis or Valkey (``--arc-store redis://HOST:PORT/DB``, ``rediss://``, ``unix://``):
the storage ``sessions/storage.py`` describes, shared by every replica on every node that
reaches the server, so any balancer may send any request of a session anywhere.

What lives in Redis (``arc:`` keys; one session's keys beside each other under ``arc:s:<id>:``):

    arc:s:<id>:meta     hash: version (compare-and-set), rest (``Session.rest`` JSON, bounded),
                        tools, summary (for listings), tenant, user, bytes (its observations')
    arc:s:<id>:log      list: the observation log, one checksummed frame per record
                        (``core/store_log.py``: the same frames a store file holds), append-only
    arc:s:<id>:fp|rec|turns|cat   lists: the growing parts of its state (fingerprints, records,
                        turns, catalog order), appended per request (``sessions/parts.py``)
    arc:s:<id>:cited    set: the Cited set, added to
    arc:s:<id>:lease    the lease of the replica serving a request of it: a fencing token, expiring
    arc:c:<start>       the conversation index of the conversations that start as <start>
                        (``ConversationIndex`` state), written under arc:c:<start>:lock
    arc:sessions        sorted set: every stored session by last use (retention, the admin's listing)
    arc:owner:<tenant>[:<user>], arc:open   sorted sets: the per-caller listings (never a scan)
    arc:owners          hash: id -> its listings (to leave them when the session goes)
    arc:ended           hash: id -> why it was removed (410); arc:ended:order bounds it
    arc:bytes           total observation bytes held; arc:bytes:by hash: per session
    arc:fence           the fencing tokens' counter
    arc:secret          the compaction handles' secret (made by the first replica)

A request's round trips: the lease taken (it returns the stored version: a cached copy still
current is used as it is, else the session is loaded, one transaction), one commit (a Lua
script: the lease's token and the version checked, then the new observation frames, the growing
parts' new items and the rest written, the version raised, expiry renewed: all or nothing), the
lease released; and the conversation index, two per use for an implicit session (lock and read
in one, write and unlock in one). docs/serving.md has the figures.

Leases: a replica holds a session for a request under a lease of ``lease_s`` seconds, renewed
every third of it while the request runs; a replica killed mid-request frees its sessions within
``lease_s``. Each lease carries a fencing token (an ever-rising counter); a commit is refused
unless the session's lease still holds the committer's token, so a stale holder (its lease
expired, another replica served the session since) writes nothing (``LeaseLost``, 409).

Faults: a store that does not answer within ``timeout_s`` (or refuses: down, restarting, out of
memory) is a ``StoreUnavailable`` (503) naming it; the commit is one script, so nothing of the
request is stored, and this process takes its copy of the session for stale (the next request
reloads what is stored). Retention (``--arc-store-retention``) is Redis expiry, renewed by every
commit; ``expire`` only tidies the listings and records why (410).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
import weakref
from urllib.parse import urlsplit, urlunsplit

import anyio
import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError, ResponseError

from arc_vllm.core.store import ObsStore
from arc_vllm.core.store_log import FrameLog
from arc_vllm.serving import metrics
from arc_vllm.serving.options import ServeOptions
from arc_vllm.serving.errors import LeaseLost, SessionBusy, SessionError, StoreUnavailable
from arc_vllm.serving.sessions.conversation_index import ConversationIndex, chain
from arc_vllm.serving.sessions.ownership import allows
from arc_vllm.serving.sessions.parts import Change, Written, decoded, encoded_items
from arc_vllm.serving.sessions.session import MAX_RECORDS, PARTS, Session, join_state, split_state
from arc_vllm.serving.sessions.storage import (INDEX_PER_START, MAX_ENDED, SessionStorage, account,
                                               is_session_id, poll)

logger = logging.getLogger(__name__)

PREFIX = "arc:"
KEEP = object()        # ``put``: the stored tools stay as they are

# The lease: taken only where none is held, with a token from the fencing counter; returns the
# token and the stored version, 0 where no session is stored, -1 and the time left where held.
TAKE = """
if redis.call('EXISTS', KEYS[2]) == 0 then return {0, 0} end
if redis.call('EXISTS', KEYS[1]) == 1 then return {-1, redis.call('PTTL', KEYS[1])} end
local token = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
return {token, tonumber(redis.call('HGET', KEYS[2], 'version') or '0')}
"""
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# The keys every commit touches beside the session's own, first among a commit's KEYS.
SESSIONS, OWNERS, BYTES, BYTES_BY = f"{PREFIX}sessions", f"{PREFIX}owners", f"{PREFIX}bytes", f"{PREFIX}bytes:by"
SHARED_KEYS = [SESSIONS, OWNERS, BYTES, BYTES_BY]
# A commit, all or nothing. KEYS: SHARED_KEYS, the session's keys (``session_keys``: meta lease
# log, then one per growing part, ``PARTS``), then the caller listings. ARGV: token ('' to
# create: the session must not exist), version expected, the session's id, last use (score),
# expiry ms (0: none), the log's new bytes, the most a session may hold, the count of the
# session's keys, then the operations: R (rpush), D (del), T (ltrim to the last N), S (sadd),
# H (hset pairs), each "op key-index count items...".
COMMIT = """
local meta, lease = KEYS[5], KEYS[6]
local last_session_key = 4 + tonumber(ARGV[8])
if ARGV[1] == '' then
  if redis.call('EXISTS', meta) == 1 then return {-2, 0} end
elseif redis.call('GET', lease) ~= ARGV[1] then
  return {-1, 0}
end
local version = tonumber(redis.call('HGET', meta, 'version') or '0')
if version ~= tonumber(ARGV[2]) then return {-2, version} end
local added = tonumber(ARGV[6])
local bytes = tonumber(redis.call('HGET', meta, 'bytes') or '0') + added
if bytes > tonumber(ARGV[7]) then return {-3, bytes} end
local at = 9
while at <= #ARGV do
  local op, key, count = ARGV[at], KEYS[tonumber(ARGV[at + 1])], tonumber(ARGV[at + 2])
  at = at + 3
  if op == 'D' then redis.call('DEL', key)
  elseif op == 'T' then redis.call('LTRIM', key, -count, -1)
  else
    local first = at
    while first < at + count do
      local last = math.min(first + 999, at + count - 1)
      if op == 'R' then redis.call('RPUSH', key, unpack(ARGV, first, last))
      elseif op == 'S' then redis.call('SADD', key, unpack(ARGV, first, last))
      elseif op == 'H' then redis.call('HSET', key, unpack(ARGV, first, last)) end
      first = last + 1
    end
    at = at + count
  end
end
version = version + 1
redis.call('HSET', meta, 'version', version, 'bytes', bytes)
local id, score = ARGV[3], ARGV[4]
redis.call('ZADD', KEYS[1], score, id)
local listings = {}
for index = last_session_key + 1, #KEYS do
  redis.call('ZADD', KEYS[index], score, id)
  table.insert(listings, KEYS[index])
end
redis.call('HSET', KEYS[2], id, table.concat(listings, ' '))
redis.call('HINCRBY', KEYS[4], id, added)
local total = redis.call('INCRBY', KEYS[3], added)
if tonumber(ARGV[5]) > 0 then
  for index = 5, last_session_key do
    if KEYS[index] ~= lease then redis.call('PEXPIRE', KEYS[index], ARGV[5]) end
  end
end
return {version, total}
"""
# The conversation index of one start, written back only by the holder of its lock.
INDEX_WRITE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else redis.call('SET', KEYS[1], ARGV[2]) end
redis.call('DEL', KEYS[2])
return 1
"""


def shown_url(url: str) -> str:
    """The store's URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class RedisStorage(SessionStorage):
    durable = True
    shared = True

    def __init__(self, url: str, lease_s: float = ServeOptions.store_lease, timeout_s: float = ServeOptions.store_timeout,
                 retention_s: float | None = None, max_session_bytes: int = ServeOptions.store_max_session_bytes,
                 lock_timeout_s: float = 60.0, client=None):
        super().__init__()
        if lease_s <= 0 or timeout_s <= 0:
            raise ValueError(f"--arc-store-lease and --arc-store-timeout: must be > 0 seconds "
                             f"(got {lease_s}, {timeout_s})")
        self.url, self.name = url, f"redis {shown_url(url)}"
        self.lease_ms, self.timeout_s, self.lock_timeout_s = int(lease_s * 1000), timeout_s, lock_timeout_s
        self.retention_ms = int(retention_s * 1000) if retention_s else 0
        self.max_session_bytes = max_session_bytes
        self.client = client or redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, health_check_interval=30,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.02), 3))
        self.scripts = {name: self.client.register_script(text) for name, text in
                        (("take", TAKE), ("renew", RENEW), ("release", RELEASE), ("commit", COMMIT),
                         ("index", INDEX_WRITE))}
        self.written: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Session -> Written
        self.tokens: dict[str, int] = {}      # session id -> this process's lease token, while held
        self.local: dict[str, list] = {}      # session id -> [asyncio.Lock, holders]: one waiter per process
        self.frames: dict[str, list] = {}     # session id -> its log's frames, while it loads
        self.num_round_trips = 0

    # -- the connection -------------------------------------------------------------------
    async def call(self, op: str, make):
        """One round trip (``make()`` the awaitable), timed; an unreachable store is a 503."""
        started = time.perf_counter()
        self.num_round_trips += 1
        try:
            return await asyncio.wait_for(make(), self.timeout_s)
        except (RedisError, OSError, asyncio.TimeoutError) as error:
            metrics.STORE_ERRORS.labels(op=op).inc()
            if isinstance(error, ResponseError) and "NOSCRIPT" not in str(error):
                logger.error("ARC store %s refused %s: %s", self.name, op, error)
            raise StoreUnavailable(f"the session store ({self.name}) did not answer {op} within "
                                   f"{self.timeout_s:g} s ({type(error).__name__}: {error}); nothing of "
                                   "this request was stored: retry once it is back") from None
        finally:
            elapsed = time.perf_counter() - started
            metrics.STORE_ROUND_TRIP.labels(op=op).observe(elapsed)
            account(elapsed)

    @staticmethod
    def key(id: str, part: str) -> str:
        return f"{PREFIX}s:{id}:{part}"

    def session_keys(self, id: str) -> list[str]:
        """meta, lease, log, then the growing parts (the order the commit script reads)."""
        return [self.key(id, "meta"), self.key(id, "lease"), self.key(id, "log"),
                *(self.key(id, part.key) for part in PARTS)]

    # -- a session's life -----------------------------------------------------------------
    def open_store(self, session) -> ObsStore:
        log = FrameLog(self.frames.pop(session.id, ()), where=f"{self.name} {session.id}")
        return ObsStore(log, head_preview_chars=session.config.head_preview_chars,
                        tail_preview_chars=session.config.tail_preview_chars)

    async def new(self, id: str, make):
        session = make(self)
        self.written[session] = Written()
        await self.write(session, token="")
        return session

    async def commit(self, session) -> None:
        token = self.tokens.get(session.id)
        if token is None:
            self.written.pop(session, None)
            raise LeaseLost(f"ARC session {session.id}: this replica no longer holds it; nothing of "
                            "this request was stored")
        await self.write(session, str(token))

    async def write(self, session, token: str) -> None:
        """What changed of ``session`` since ``written`` (its new frames, the growing parts' new
        items, the rest, the tools where they changed) in one commit script."""
        written = self.written.get(session)
        if written is None:  # not loaded here (a copy this process no longer trusts)
            raise LeaseLost(f"ARC session {session.id}: this replica's copy is stale; nothing of "
                            "this request was stored")
        rest = session.rest()
        tools = rest.pop("tools")
        try:
            version = await self.put(session.id, token, written.version, rest, session.store.log.take(),
                                     written.changes(session),
                                     tools if token == "" or written.tools_changed(session) else KEEP)
        except BaseException:
            self.written.pop(session, None)  # stale: the next request reloads what is stored
            raise
        written.take(session, version)

    async def put(self, id: str, token: str, version: int, rest: dict, frames: list[bytes], changes, tools) -> int:
        """One commit script: ``frames`` appended to the log, each ``Change`` to its part, the
        rest (and ``tools``, unless ``KEEP``) replaced, where the lease holds ``token`` ('': a new
        session) and the stored version is ``version``. Returns the new version."""
        ops: list = []

        def op(kind: str, key_index: int, items: list = (), count: int | None = None) -> None:
            # key_index: the key's place in ``session_keys``; count: the items', or ltrim's length
            ops.extend((kind, len(SHARED_KEYS) + key_index + 1, len(items) if count is None else count, *items))

        if frames:
            op("R", 2, frames)
        for change in changes:
            index, kind = next((3 + at, part.kind) for at, part in enumerate(PARTS) if part.name == change.name)
            if change.reset:
                op("D", index)
            if change.items:
                op("S" if kind == "set" else "R", index, change.items)
            if kind == "ring":
                op("T", index, count=MAX_RECORDS)
        fields = ["rest", json.dumps(rest, ensure_ascii=False), "summary", json.dumps(rest.get("summary") or {"id": id}),
                  "tenant", rest.get("tenant") or "", "user", rest.get("user") or ""]
        if tools is not KEEP:
            fields += ["tools", json.dumps(tools, ensure_ascii=False)]
        op("H", 0, fields)
        listings = self.listings(rest.get("tenant"), rest.get("user"))
        added = sum(len(frame) for frame in frames)
        last_used = int(float(rest.get("last_used") or time.time()) * 1000)
        own = self.session_keys(id)
        args = [token, version, id, last_used, self.retention_ms, added, self.max_session_bytes, len(own), *ops]
        keys = [*SHARED_KEYS, *own, *listings]
        version, total = await self.call("commit", lambda: self.scripts["commit"](keys=keys, args=args))
        if version == -3:
            raise SessionError(f"ARC session {id} would hold {total} bytes of observations, over "
                               f"--arc-store-max-session-bytes {self.max_session_bytes}; nothing of this "
                               "request was stored: start a new session", 413)
        if version < 0:
            raise LeaseLost(f"ARC session {id}: another replica served it since this one took it "
                            "(its lease expired); nothing of this request was stored" if token else
                            f"ARC session {id}: already stored")
        self.stored_bytes = total
        return version

    async def export(self, id: str) -> tuple[dict, list[bytes]] | None:
        """The stored session as (its whole state, its log's frames), untouched (``store copy``)."""
        read = await self.read(id)
        return None if read is None else (read[0], read[1])

    async def import_state(self, id: str, state: dict, frames: list[bytes]) -> None:
        """A session stored as ``export`` gave it (refused where one is stored under its id)."""
        rest, parts = split_state(state)
        tools = rest.pop("tools", None)
        changes = [Change(name, True, encoded_items(name, items)) for name, items in parts.items()]
        await self.put(id, "", 0, rest, list(frames), changes, tools)

    async def read(self, id: str):
        """(its whole state, its frames, the stored version) in one transaction, or None."""
        if not is_session_id(id):
            return None

        async def read():
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hgetall(self.key(id, "meta"))
                pipe.lrange(self.key(id, "log"), 0, -1)
                for part in PARTS:
                    if part.kind == "set":
                        pipe.smembers(self.key(id, part.key))
                    else:
                        pipe.lrange(self.key(id, part.key), 0, -1)
                return await pipe.execute()

        meta, frames, *parts = await self.call("load", read)
        if not meta:
            return None
        rest = json.loads(meta[b"rest"])
        rest["tools"] = json.loads(meta.get(b"tools", b"null"))
        state = join_state(rest, {part.name: decoded(part.name, items) for part, items in zip(PARTS, parts)})
        return state, frames, int(meta[b"version"])

    async def load(self, id, counter):
        read = await self.read(id)
        if read is None:
            return None
        state, frames, version = read
        self.frames[id] = frames
        try:
            session = Session.from_state(state, counter, self)
        finally:
            self.frames.pop(id, None)
        self.written[session] = Written.of(session, version)
        return session

    async def exists(self, id) -> bool:
        return is_session_id(id) and bool(await self.call("exists", lambda: self.client.exists(self.key(id, "meta"))))

    async def ended(self, id) -> str | None:
        if not is_session_id(id):
            return None

        async def read():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.hget(f"{PREFIX}ended", id)
                pipe.zscore(SESSIONS, id)
                return await pipe.execute()

        why, listed = await self.call("ended", read)
        if why is not None:
            return why.decode("utf-8")
        if listed is not None and not await self.exists(id):  # expired, not tidied yet
            return "unused for longer than --arc-store-retention and removed from the store"
        return None

    async def stored_ids(self) -> list[str]:
        ids = await self.call("listing", lambda: self.client.zrange(SESSIONS, 0, -1))
        return sorted(id.decode() for id in ids)

    async def delete(self, id: str) -> None:
        if is_session_id(id):
            await self.remove([id])

    async def remove(self, ids: list[str], why: str | None = None) -> None:
        """Sessions gone: their keys, their listings, their bytes; with ``why``, remembered (410)."""
        async def read():
            async with self.client.pipeline(transaction=False) as pipe:
                for id in ids:
                    pipe.hget(OWNERS, id)
                    pipe.hget(BYTES_BY, id)
                return await pipe.execute()

        found = await self.call("remove", read)
        now = time.time()

        async def write():
            async with self.client.pipeline(transaction=True) as pipe:
                for position, id in enumerate(ids):
                    listings, size = found[2 * position], found[2 * position + 1]
                    pipe.delete(*self.session_keys(id))
                    pipe.zrem(SESSIONS, id)
                    for listing in (listings or b"").decode().split():
                        pipe.zrem(listing, id)
                    pipe.hdel(OWNERS, id)
                    pipe.hdel(BYTES_BY, id)
                    pipe.decrby(BYTES, int(size or 0))
                    if why is not None:
                        pipe.hset(f"{PREFIX}ended", id, why)
                        pipe.zadd(f"{PREFIX}ended:order", {id: now})
                return await pipe.execute()

        await self.call("remove", write)

    async def listing(self, skip, who) -> list[dict]:
        if who is None or who.admin:
            sources = [SESSIONS]
        else:
            sources = [f"{PREFIX}open", self.listings(who.tenant, who.user)[-1]]

        async def read():
            async with self.client.pipeline(transaction=False) as pipe:
                for source in sources:
                    pipe.zrevrange(source, 0, 9999)
                return await pipe.execute()

        ids = {id.decode() for batch in await self.call("listing", read) for id in batch} - set(skip)
        if not ids:
            return []
        ordered = sorted(ids)

        async def summaries():
            async with self.client.pipeline(transaction=False) as pipe:
                for id in ordered:
                    pipe.hmget(self.key(id, "meta"), "summary", "tenant", "user")
                return await pipe.execute()

        rows = []
        for id, (summary, tenant, user) in zip(ordered, await self.call("listing", summaries)):
            if summary is None:  # expired meanwhile
                continue
            tenant, user = (tenant or b"").decode() or None, (user or b"").decode() or None
            if who is not None and not allows(tenant, user, who, write=False):
                continue
            rows.append(json.loads(summary))
        return rows

    @staticmethod
    def listings(tenant: str | None, user: str | None) -> list[str]:
        """The per-caller listings a session of ``tenant`` and ``user`` is in."""
        if tenant is None:
            return [f"{PREFIX}open"]
        return [f"{PREFIX}owner:{tenant}"] + ([f"{PREFIX}owner:{tenant}:{user}"] if user else [])

    # -- one request's hold ---------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def held(self, id: str, cached, counter):
        if not is_session_id(id):
            yield None
            return
        async with self.locally(id):
            token, version = await self.take(id)
            if token == 0:  # not stored (removed meanwhile)
                yield None
                return
            self.tokens[id] = token
            renewal = asyncio.get_running_loop().create_task(self.renew(id, token))
            try:
                written = self.written.get(cached) if cached is not None else None
                if written is not None and written.version == version:
                    session = cached
                else:
                    if cached is not None:
                        cached.close()
                    session = await self.load(id, counter)
                yield session
            finally:
                renewal.cancel()
                self.tokens.pop(id, None)
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(SessionError):  # unreachable: the lease expires by itself
                        await self.call("release", lambda: self.scripts["release"](
                            keys=[self.key(id, "lease")], args=[token]))

    @contextlib.asynccontextmanager
    async def locally(self, id: str):
        """One request of a session per process waits for its lease; the others wait here."""
        entry = self.local.setdefault(id, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self.local[id]

    async def take(self, id: str) -> tuple[int, int]:
        """The session's lease (its token, and the stored version), waiting while another holds it."""
        keys = [self.key(id, "lease"), self.key(id, "meta"), f"{PREFIX}fence"]

        async def attempt():
            token, other = await self.call("lease", lambda: self.scripts["take"](keys=keys, args=[self.lease_ms]))
            return (token, other) if token >= 0 else None

        return await poll(attempt, self.lock_timeout_s, lambda: SessionBusy(
            f"{id}: served by another replica for more than {self.lock_timeout_s:.0f} s"))

    async def renew(self, id: str, token: int) -> None:
        """Keep the lease while the request runs; one lost is not taken back (the commit is refused)."""
        key = self.key(id, "lease")
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                if not await self.call("lease", lambda: self.scripts["renew"](keys=[key], args=[token, self.lease_ms])):
                    logger.warning("ARC session %s: this replica's lease expired while it served a request", id)
                    return
            except SessionError:  # unreachable for now: the next renewal tries again
                continue

    # -- the conversation index -----------------------------------------------------------
    @contextlib.asynccontextmanager
    async def conversations(self, scope: str, prints: list[str], until: float = float("inf")):
        if not prints:
            yield self.index
            return
        key = f"{PREFIX}c:{chain(scope, prints[:1])[0]}"
        lock, token = key + ":lock", secrets.token_hex(8)
        async def lock_and_read():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.set(lock, token, nx=True, px=self.lease_ms)
                pipe.get(key)
                return await pipe.execute()

        async def attempt():
            locked, stored = await self.call("index", lock_and_read)
            return (stored,) if locked else None

        async with self.locally(key):
            [stored] = await poll(attempt, self.lock_timeout_s, lambda: SessionBusy(
                f"the conversation index was held by another replica for more than {self.lock_timeout_s:.0f} s"))
            try:
                index = ConversationIndex.from_state(json.loads(stored) if stored else {}, time.time())
                index.max_sessions = INDEX_PER_START
                yield index
                text = json.dumps(index.state(time.time()))
                with anyio.CancelScope(shield=True):
                    written = await self.call("index", lambda: self.scripts["index"](
                        keys=[key, lock], args=[token, text, self.retention_ms]))
                if not written:
                    logger.warning("ARC conversation index %s: its lock expired before it was written; "
                                   "the next request of the conversation indexes it again", key)
            except BaseException:
                with anyio.CancelScope(shield=True), contextlib.suppress(SessionError):
                    await self.call("release", lambda: self.scripts["release"](keys=[lock], args=[token]))
                raise

    # -- retention, the secret, the end -----------------------------------------------------
    async def expire(self, retention_s: float, busy) -> list[str]:
        """Redis expired the sessions' keys itself; here the listings are tidied and why they
        went is kept (410), none serving a request."""
        cutoff = (time.time() - retention_s) * 1000
        ids = [id.decode() for id in await self.call("expire", lambda: self.client.zrangebyscore(
            SESSIONS, "-inf", cutoff))]
        gone = [id for id in ids if not busy(id)]
        if gone:
            await self.remove(gone, f"unused for more than {retention_s:g} s and removed from the store "
                                    "(--arc-store-retention)")

        async def tidy():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.zrange(f"{PREFIX}ended:order", 0, -MAX_ENDED - 1)
                pipe.zremrangebyrank(f"{PREFIX}ended:order", 0, -MAX_ENDED - 1)
                pipe.get(BYTES)
                return await pipe.execute()

        oldest, _, total = await self.call("expire", tidy)
        if oldest:
            await self.call("expire", lambda: self.client.hdel(f"{PREFIX}ended", *oldest))
        self.stored_bytes = int(total or 0)
        return gone

    async def secret(self) -> bytes:
        """The store's secret: the first replica sets it, every other reads the same."""
        async def read():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.set(f"{PREFIX}secret", secrets.token_hex(32), nx=True)
                pipe.get(f"{PREFIX}secret")
                return await pipe.execute()

        return (await self.call("secret", read))[1]

    async def close(self) -> None:
        await self.client.aclose()


if __name__ == "__main__":
    import sys

    async def show(url: str) -> None:
        storage = RedisStorage(url)
        for id in await storage.stored_ids():
            print(id)
        await storage.close()

    asyncio.run(show(sys.argv[1]))
