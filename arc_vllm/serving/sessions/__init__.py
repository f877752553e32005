"""Sessions: who a request is, which session it continues, and the sessions themselves.

    session             one session: its context, store and records, taken in and saved
    manager             every session of one API process: created, found, held, ended (a
                        cache over its storage)
    storage             where sessions live beyond memory: the interface, host memory
    folder              a folder (--arc-store DIR): one machine's processes
    redis_store         Redis or Valkey (--arc-store redis://...): any replica on any node
    places              which storage --arc-store names
    store_copy          sessions copied between stores (``arc-vllm store copy SRC DST``)
    parts               what a store holds of a session's state, and what changed since
    conversation_keys   the wire keys: the session a request names, its caller, the client's
                        own conversation id
    conversation_index  an implicit session by its conversation (the client's id, or the
                        fingerprints of its messages)
    seen_conversations  a resent conversation fingerprinted only past what was seen
    ownership           whose a session is, and who may continue or read it
    locks               a session's lock across processes

May import: ``arc_vllm.core``, ``arc_vllm.kv`` (its wire keys), the base modules, and the
serving leaves (``errors``, ``metrics``, ``processes``); nothing of compaction, step, apis or
the routes.
"""
