"""The plugin's start-up check of the vLLM it runs on (``serving/vllm_compat.py``): the
installed vLLM passes; a version outside the tested range warns, naming the range; a missing
hook fails at start, naming the hook and the version.

    pytest tests/test_vllm_compat.py
"""

import logging

import pytest

from arc_vllm.serving import vllm_compat


def test_the_installed_vllm_has_every_hook():
    assert vllm_compat.missing_hooks() == []
    assert vllm_compat.check().startswith("0.3")


def test_an_untested_version_warns_and_a_missing_hook_fails_at_start(monkeypatch, caplog):
    import vllm
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

    monkeypatch.setattr(vllm, "__version__", "0.40.1")
    with caplog.at_level(logging.WARNING, logger="arc_vllm.serving.vllm_compat"):
        vllm_compat.check()
    assert ">=0.32,<0.34" in caplog.text and "0.40.1" in caplog.text
    monkeypatch.delattr(KVConnectorBase_V1, "get_handshake_metadata")
    with pytest.raises(RuntimeError, match="0.40.1 lacks.*KVConnectorBase_V1.get_handshake_metadata"):
        vllm_compat.check()
