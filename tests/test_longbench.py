"""LongBench-v2: the loader (official schema, hard subset, clear errors), the official answer
extraction, paging, and `bench longbench` end to end on the fixture with a real engine."""

import json
import re
from pathlib import Path

import pytest

from arc_vllm.evaluation import longbench
from arc_vllm.evaluation.bench import Setting
from arc_vllm.agent.loop import run_episode
from arc_vllm.core.config import ArcConfig
from arc_vllm.policies import make_policy

FIXTURE = Path(__file__).parent / "fixtures" / "longbench_v2_sample.json"


def test_loader_reads_the_official_schema_and_the_hard_subset(tmp_path):
    hard = longbench.load(FIXTURE)
    assert len(hard) == 4 and all(item["difficulty"] != "easy" for item in hard)
    assert len(longbench.load(FIXTURE, "all")) == 5
    items = json.loads(FIXTURE.read_text())
    lines = tmp_path / "data.jsonl"
    lines.write_text("\n".join(json.dumps(item) for item in items))
    assert [i["_id"] for i in longbench.load(lines)] == [i["_id"] for i in hard]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{k: v for k, v in items[0].items() if k != "choice_C"}]))
    with pytest.raises(ValueError, match="item 0 lacks choice_C"):
        longbench.load(broken)
    broken.write_text(json.dumps([dict(items[0], answer="E")]))
    with pytest.raises(ValueError, match="answer 'E', not A-D"):
        longbench.load(broken)
    with pytest.raises(ValueError, match="no LongBench-v2 file"):
        longbench.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="unknown subset"):
        longbench.load(FIXTURE, "medium")


def test_official_answer_extraction():
    assert longbench.extract_answer("**The correct answer is (B)**") == "B"
    assert longbench.extract_answer("so... The correct answer is C.") == "C"
    assert longbench.extract_answer("The correct answer is (D) or The correct answer is A") == "D"
    assert longbench.extract_answer("I think (A)") is None


def test_pages_join_to_the_document_and_the_tools_answer():
    item = longbench.load(FIXTURE)[0]
    task = longbench.LongBenchTask(item, 42, 0, page_chars=3000)
    assert "".join(task.pages) == item["context"] and all(len(p) <= 3000 for p in task.pages)
    text, code = task.run("read_page 1")
    assert code == 0 and text.startswith(f"[page 1/{len(task.pages)}]") and "key decision" in text
    assert task.run(f"read_page {len(task.pages)}")[0].rstrip().endswith("[END OF DOCUMENT]")
    assert task.run("read_page 0")[1] == 1 and task.run("rm -rf /")[1] == 127
    assert task.score(f"The correct answer is ({item['answer']})") is True
    assert task.score("read_page 2") is None
    assert re.fullmatch(task.action_regex, "The correct answer is (C)")


class PageReader:
    """A test agent: reads every page in order, then answers (A)."""

    def act(self, messages):
        text = "\n".join(m["content"] for m in messages)
        pages = re.findall(r"Action: read_page (\d+)", text)
        total = int(re.search(r"pages 1 to (\d+)", messages[1]["content"]).group(1))
        following = int(pages[-1]) + 1 if pages else 1
        return "", f"read_page {following}" if following <= total else "The correct answer is (A)"


def test_full_context_cannot_hold_a_long_document_arc_can(smol):
    config = ArcConfig.for_window(4096, 512)
    item = longbench.load(FIXTURE)[0]
    for method, crashes in (("full_context", True), ("arc", False)):
        task = longbench.LongBenchTask(item, 42, 0)
        policy = make_policy(method, smol, config.input_budget_tokens, task=task.prompt, config=config)
        result = run_episode(policy, task, PageReader(), smol, config.input_budget_tokens, max_calls=task.max_calls)
        assert result["crashed"] is crashes and result["answered"] is not crashes, result
        assert result["max_prompt_tokens"] <= config.input_budget_tokens


@pytest.mark.slow
def test_bench_longbench_end_to_end_on_a_real_engine(tmp_path, tiny_engine, smol):
    from arc_vllm.evaluation.longbench_bench import run

    out = tmp_path / "lb"
    summary = run(str(out), str(FIXTURE), ["arc", "sliding_window"], [42], 2, smol,
                  settings=[Setting(noise_lines=None)], backend=tiny_engine, context_window=2048,
                  max_tokens=256, concurrency=4, agent_max_tokens=24)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["method"], r["task"]) for r in rows) == [("arc", 0), ("arc", 1),
                                                              ("sliding_window", 0), ("sliding_window", 1)]
    for row in rows:
        assert row["benchmark"] == "longbench" and row["setting"] == "force=5,10,15 recall=16k/8k"
        agent_calls = [entry for entry in row["trace"] if entry[0] == "agent"]
        assert len(agent_calls) == row["calls"] > 0 and all(entry[3] is not None for entry in agent_calls)
        assert row["max_prompt_tokens"] <= ArcConfig.for_window(2048, 256).input_budget_tokens
    assert set(summary["methods"]) == {"arc", "sliding_window"}
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
