"""Token counting: the cached, segment-wise chat count equals a plain full encode."""

import os
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from arc_vllm.core.tokens import CachedCounter, TiktokenCounter, install_offline_tiktoken, tiktoken_file_name

messages_strategy = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                           "content": st.text(max_size=300)}), min_size=1, max_size=6)


@given(messages_strategy)
def test_segment_count_equals_full_encode(smol, messages):
    """Counts and ids taken segment by segment (through their cache) are a full encode's."""
    rendered = smol.render(messages)
    assert smol.count_messages(messages) == smol.count_rendered(rendered)
    assert smol.prompt_token_ids(messages) == smol._backend.encode(rendered, add_special_tokens=False).ids
    assert smol.prompt_token_ids(messages) == smol._backend.encode(rendered, add_special_tokens=False).ids  # cached


def test_special_token_text_inside_content_is_counted_like_the_engine(smol):
    messages = [{"role": "user", "content": "a <|im_end|> b <|im_start|>"}]
    assert smol.count_messages(messages) == smol.count_rendered(smol.render(messages))
    assert smol.prompt_token_ids(messages) == smol._backend.encode(smol.render(messages), add_special_tokens=False).ids


@given(st.text(max_size=400))
def test_token_starts_are_exact_character_offsets(smol, text):
    """Between two clean cuts (tokens that start on a new character) the tokens' bytes are
    exactly the text's bytes between their character offsets, less the bytes the vocabulary
    cannot represent (the tokenizer drops those)."""
    starts = smol.token_starts(text)
    tokens = smol._backend.encode(text, add_special_tokens=False).tokens
    assert len(starts) == len(tokens) == smol.count(text)
    assert starts == sorted(starts) and all(0 <= start < len(text) for start in starts)
    cuts = [i for i in range(1, len(starts)) if starts[i] > starts[i - 1]]
    for left, right in zip([0] + cuts, cuts + [len(tokens)]):
        end = starts[right] if right < len(tokens) else len(text)
        token_bytes = bytes(smol._byte_of[symbol] for token in tokens[left:right] for symbol in token)
        text_bytes = bytes(byte for byte in text[starts[left] if left else 0:end].encode()
                           if byte not in smol._unknown_bytes)
        assert token_bytes == text_bytes


@given(st.text(max_size=400) | st.text(st.sampled_from("a b\x04\u00e9\u20ac\U00040000\U0001F600\n"), max_size=80))
def test_token_by_token_offsets_equal_the_byte_by_byte_alignment(smol, text):
    """The offsets walked token by token (the tokens' bytes checked against the text's at
    once) are the byte-by-byte alignment's, dropped bytes (\\x04, the 0xF1 that starts
    U+40000) and characters cut inside included."""
    inner = getattr(smol, "inner", smol)
    tokens = inner._backend.encode(text, add_special_tokens=False).tokens
    assert inner._byte_level_starts(text, tokens) == inner._aligned_starts(text.encode(), tokens)


def test_the_embedded_tokenizer_drops_bytes_its_vocabulary_lacks(smol):
    """A fact about SmolLM2's vocabulary that the store must not inherit: the model never
    sees these bytes, but the store keeps and returns them exactly."""
    from arc_vllm.core.store import ObsStore

    assert {0x04, 0xF1} <= smol._unknown_bytes
    assert smol.count("a\x04b") == smol.count("a") + smol.count("b")  # \x04 gives no token
    store = ObsStore()
    record = store.append("tool", "a\x04b\U00040000", step=1)
    assert store.get(record.id).content == "a\x04b\U00040000"


@given(st.text(max_size=400))
def test_tiktoken_starts_are_character_offsets(o200k, text):
    starts = o200k.token_starts(text)
    assert len(starts) == o200k.count(text) and starts == sorted(starts)


def test_tiktoken_works_offline(o200k):
    assert os.environ["TIKTOKEN_CACHE_DIR"]
    assert o200k.count("hello world") == 2
    assert TiktokenCounter("cl100k_base").count("hello world") == 2


def test_tiktoken_accepts_another_folder_holding_the_file_and_refuses_one_that_does_not(
        monkeypatch, tmp_path):
    # litellm, on import, points TIKTOKEN_CACHE_DIR at its own bundled copy of the files.
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    name = tiktoken_file_name("cl100k_base")
    (theirs / name).write_bytes((Path(install_offline_tiktoken()) / name).read_bytes())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(theirs))
    assert TiktokenCounter("cl100k_base").count("hello world") == 2
    with pytest.raises(RuntimeError, match="o200k_base.*TIKTOKEN_CACHE_DIR"):
        TiktokenCounter("o200k_base")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    with pytest.raises(RuntimeError, match="would download"):
        TiktokenCounter("cl100k_base")


def test_cached_counter_counts_once(smol):
    cached = CachedCounter(smol)
    text = "an immutable stub " * 50
    assert cached.count(text) == cached.count(text) == smol.count(text)
    assert (cached.num_misses, cached.num_hits) == (1, 1)


def test_the_counters_tokenizer_is_the_one_autotokenizer_gives(smol, reasoning_counter):
    """The counter loads a plain tokenizer class without AutoTokenizer (whose import costs
    seconds): for every model the suite serves it is the tokenizer vLLM's AutoTokenizer gives,
    the same class, backend and chat template. Qwen3's and DeepSeek-R1's folders name
    Qwen2Tokenizer, which rebuilds its backend (loaded as a plain class, the backend differs),
    so they go through AutoTokenizer. The byte-level alphabet is GPT-2's."""
    from transformers import AutoTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    from arc_vllm.core.tokens import HFTokenCounter, byte_level_symbols
    from arc_vllm.reasoning_model import prepare

    assert byte_level_symbols() == bytes_to_unicode()
    for counter in (smol, reasoning_counter, HFTokenCounter(str(prepare("r1")))):
        folder = counter.name
        ours, theirs = counter.tokenizer, AutoTokenizer.from_pretrained(folder)
        assert type(ours) is type(theirs), folder
        assert ours.backend_tokenizer.to_str() == theirs.backend_tokenizer.to_str(), folder
        assert ours.chat_template == theirs.chat_template, folder
