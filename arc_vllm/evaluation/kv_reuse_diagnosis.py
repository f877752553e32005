"""``arc-vllm bench kv-reuse --diagnose``: where reused KV's quality goes.

For each compaction pair (the view before a compaction, the compacted view) the compacted
view is computed three ways on the in-process engine, each from an empty prefix cache after
the previous view:

- ``off``: whole (the reference, what vLLM computes without reuse);
- ``chunked``: whole again, cut at the warm-up stages' boundaries (each stage a request of
  its own, without a session, so nothing is claimed): the same tokens in the same context,
  computed in other chunks. How far it lies from ``off`` is the floor of the engine's own
  numerics (the attention kernel over cached blocks against within a chunk, the matmuls'
  blocking by batch size): two exact computations of one view differ by this much;
- ``on``: the session's KV moved by ARC's connector, as the bench's ``on``.

After each prefill the K and V the engine holds for the view are read back from its cache
(the connector's worker half holds every layer's cache) and, at the positions whose KV was
moved, compared with ``off``'s: the relative error per token, ``||x - x_off|| / ||x_off||``
over heads and head size, its median per layer, and by distance from the seam (the first
position of the moved piece). The sources separate so:

- **re-rotation rounding**: layer 0 of ``on`` (a layer-0 key depends on its token and position
  only, so its error is the move's arithmetic: the saved key, rounded to the cache dtype once
  by the engine, rotated in float32 and rounded again); beside it the same move kept in
  float32 (``move_unrounded``), the part of the error the second rounding adds;
- **the kernels' numerics**: ``chunked`` at every layer;
- **the missing cross-attention**: ``on`` beyond ``chunked`` at the deeper layers (tokens after
  a seam were computed after other text), largest right after the seam.

The outputs are compared as the bench compares them (greedy agreement over 32 tokens, mean
top-20 KL), for ``chunked`` too: the agreement any reuse can be held to on this machine.

Run:  arc-vllm bench kv-reuse --diagnose --niah-tasks 0 --chains 0 [--dtype bfloat16] [--attention-isa vec]
"""

from __future__ import annotations

import logging
import statistics

import torch

from arc_vllm.kernels.kv_layout import slots_of
from arc_vllm.kernels.rope import rotate
from arc_vllm.kv.claims import ClaimReplay
from arc_vllm.kv.extra_args import ArcExtraArgs
from arc_vllm.kv.spans import claimed_tokens, prefix_hit, warmup_boundaries
from arc_vllm.vllm_compat import engine_scheduler, reach, worker_connector

logger = logging.getLogger(__name__)

SEAM_BUCKETS = ((0, 8), (8, 32), (32, 128), (128, None))  # tokens after the seam


def bucket_name(low: int, high: int | None) -> str:
    return f"{low}-{high - 1}" if high is not None else f"{low}+"


def per_token_error(value: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``||x - x_ref|| / ||x_ref||`` per token, over heads and head size (``[n, heads, d]``)."""
    difference = (value.float() - reference.float()).flatten(1).norm(dim=1)
    return difference / reference.float().flatten(1).norm(dim=1).clamp_min(1e-12)


class CacheReader:
    """Runs one prompt to its first token on the in-process engine, reads every layer's K and
    V for it while it still runs, then lets it finish (``GENERATED`` tokens with logprobs)."""

    def __init__(self, llm, generated: int, top_logprobs: int):
        self.llm = llm
        self.generated = generated
        self.top_logprobs = top_logprobs
        self.scheduler = engine_scheduler(llm)
        self.blocks = reach(self.scheduler, "kv_cache_manager", "the blocks of a running request")
        self.layers = reach(worker_connector(), "layers", "the engine's KV caches")
        self.runs = 0

    def run(self, tokens: list[int], extra_args: dict | None, read: bool = True) -> tuple[object, dict | None]:
        from vllm import SamplingParams, TokensPrompt

        engine = self.llm.llm_engine
        self.runs += 1
        request_id = f"diagnose-{self.runs}"
        engine.add_request(request_id, TokensPrompt(prompt_token_ids=tokens),
                           SamplingParams(max_tokens=self.generated, temperature=0.0, ignore_eos=True,
                                          logprobs=self.top_logprobs, extra_args=extra_args or None))
        held, final = None, None
        while engine.has_unfinished_requests():
            for output in engine.step():
                if output.request_id != request_id:
                    continue
                if read and held is None and output.outputs[0].token_ids:
                    held = self.read(request_id, len(tokens))
                if output.finished:
                    final = output.outputs[0]
        return final, held

    def read(self, request_id: str, length: int) -> dict:
        # The engine adds a suffix of its own to the id it was given.
        [internal] = [key for key in self.scheduler.requests if key.startswith(request_id + "-")]
        [block_ids] = self.blocks.get_block_ids(internal)
        held = {}
        for name, layer in self.layers.items():
            slots = slots_of(list(block_ids), 0, length, layer.block_size).to(layer.tensor.device)
            key, value = layer.read(slots)
            held[name] = (key.cpu(), value.cpu())
        return held


def moved_positions(pieces: list[tuple[int, int, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For the moved pieces (new != saved): positions, their saved positions, and each one's
    distance from its piece's first position (the seam)."""
    new, old, distance = [], [], []
    for start, source, length in pieces:
        if start == source:
            continue  # claimed in place: the context is the saved one, exact
        new += range(start, start + length)
        old += range(source, source + length)
        distance += range(length)
    return torch.tensor(new, dtype=torch.int64), torch.tensor(old, dtype=torch.int64), torch.tensor(distance)


def layer_order(names) -> list[str]:
    """Layer names by their index (``model.layers.12.self_attn.attn`` -> 12)."""
    def index(name: str) -> int:
        numbers = [int(part) for part in name.split(".") if part.isdigit()]
        return numbers[0] if numbers else 0
    return sorted(names, key=index)


def diagnose_pair(reader: CacheReader, pair: dict, block_size: int, min_run: int, cos_sin: torch.Tensor,
                  is_neox: bool, session: str, agreement_and_kl) -> dict | None:
    """One pair three ways; None when nothing was moved (nothing to diagnose)."""
    previous, current = pair["previous"], pair["current"]
    claims = ClaimReplay(block_size=block_size, min_run=min_run)
    claims.next(previous, 0)
    planned = claims.next(current, prefix_hit(previous, current, block_size))
    new, old, distance = moved_positions(planned["pieces"])
    if not len(new):
        return None
    boundaries = warmup_boundaries(previous, current, block_size, min_run, 0)
    llm = reader.llm
    runs = {}
    # off: the previous view, then the compacted view whole.
    llm.reset_prefix_cache()
    reader.run(previous, None, read=False)
    runs["off"] = reader.run(current, None)
    # chunked: the same, the compacted view cut at the stages' boundaries (no session: no claim).
    llm.reset_prefix_cache()
    reader.run(previous, None, read=False)
    for boundary in boundaries:
        reader.run(current[:boundary], None, read=False)
    runs["chunked"] = reader.run(current, None)
    # on: the previous view saved under a session, the stages claimed for, then the view.
    llm.reset_prefix_cache()
    connector = reader.scheduler.connector
    reader.run(previous, ArcExtraArgs(session=session).to_dict(), read=False)
    stored = worker_connector().store[session]
    saved = {name: tensors[0] for name, tensors in stored.layers.items()}
    computed_at = stored.origin[old]  # a fresh session's view: every row where it was computed
    before = connector.num_supplied_tokens
    for boundary in boundaries:
        reader.run(current[:boundary], ArcExtraArgs(session=session, save=False).to_dict(), read=False)
    runs["on"] = reader.run(current, ArcExtraArgs(session=session).to_dict())
    claimed = connector.num_supplied_tokens - before
    names = layer_order(runs["off"][1])
    off_held = runs["off"][1]
    result = {"trajectory": pair["trajectory"], "step": pair["step"], "prompt_tokens": len(current),
              "moved_tokens": len(new), "claimed": claimed, "planned": claimed_tokens(planned["pieces"]),
              "layers": {}, "outputs": {}}
    for mode in ("chunked", "on"):
        output, held = runs[mode]
        agreement, kl = agreement_and_kl(runs["off"][0], output)
        result["outputs"][mode] = {"greedy_agreement": agreement, "mean_kl": kl}
        for depth, name in enumerate(names):
            key_error = per_token_error(held[name][0][new], off_held[name][0][new])
            value_error = per_token_error(held[name][1][new], off_held[name][1][new])
            row = result["layers"].setdefault(depth, {})
            row[mode] = {"key": key_error, "value": value_error}
    # The move at layer 0 without its second rounding: the saved key rotated in float32.
    first = names[0]
    unrounded = rotate(saved[first][old], new - computed_at, cos_sin, is_neox)
    result["move_unrounded_layer0_key"] = per_token_error(unrounded, off_held[first][0][new])
    result["distance"] = distance
    return result


def summarise(diagnosed: list[dict]) -> dict:
    """Medians over every moved token of every pair, per layer and by distance from the seam."""
    if not diagnosed:
        return {"pairs": 0}
    distance = torch.cat([item["distance"] for item in diagnosed])
    depths = sorted(diagnosed[0]["layers"])

    def gathered(depth: int, mode: str, part: str) -> torch.Tensor:
        return torch.cat([item["layers"][depth][mode][part] for item in diagnosed])

    def median(values: torch.Tensor) -> float:
        return round(values.median().item(), 6) if len(values) else float("nan")

    layers = [{"layer": depth, **{f"{mode}_{part}": median(gathered(depth, mode, part))
                                  for mode in ("chunked", "on") for part in ("key", "value")}}
              for depth in depths]
    by_seam = {}
    for low, high in SEAM_BUCKETS:
        inside = (distance >= low) & ((distance < high) if high is not None else torch.ones_like(distance, dtype=torch.bool))
        by_seam[bucket_name(low, high)] = {
            "tokens": int(inside.sum()),
            **{f"{mode}_key_last_layer": median(gathered(depths[-1], mode, "key")[inside]) for mode in ("chunked", "on")},
            **{f"{mode}_key_middle_layer": median(gathered(depths[len(depths) // 2], mode, "key")[inside])
               for mode in ("chunked", "on")}}
    outputs = {mode: {name: round(statistics.mean(item["outputs"][mode][name] for item in diagnosed), 5)
                      for name in ("greedy_agreement", "mean_kl")} for mode in ("chunked", "on")}
    consistent = all(item["claimed"] == item["planned"] for item in diagnosed)
    return {"pairs": len(diagnosed), "moved_tokens": int(len(distance)),
            "claims_as_planned": consistent,
            "rounding": {"on_layer0_key": median(gathered(depths[0], "on", "key")),
                         "move_unrounded_layer0_key": median(torch.cat(
                             [item["move_unrounded_layer0_key"] for item in diagnosed])),
                         "chunked_layer0_key": median(gathered(depths[0], "chunked", "key"))},
            "layers": layers, "by_seam": by_seam, "outputs": outputs}


def diagnose(llm, pairs: list[dict], block_size: int, min_run: int, generated: int, top_logprobs: int,
             agreement_and_kl) -> dict:
    connector = worker_connector()
    reader = CacheReader(llm, generated, top_logprobs)
    [first] = list(connector.layers.values())[:1]
    cos_sin = connector.cos_sin(first.tensor.device).cpu()
    diagnosed = []
    for index, pair in enumerate(pairs):
        item = diagnose_pair(reader, pair, block_size, min_run, cos_sin, connector.is_neox,
                             f"diagnose-{index}", agreement_and_kl)
        if item is not None:
            diagnosed.append(item)
            logger.info("  diagnosed turn %d/%d: %d moved tokens, on %s, chunked %s", index + 1, len(pairs),
                        item["moved_tokens"], item["outputs"]["on"], item["outputs"]["chunked"])
    return summarise(diagnosed)


def table(diagnosis: dict) -> str:
    if not diagnosis.get("pairs"):
        return "Diagnosis: no pair moved any KV."
    rounding = diagnosis["rounding"]
    outputs = diagnosis["outputs"]
    lines = [f"Diagnosis over {diagnosis['pairs']} pairs, {diagnosis['moved_tokens']} moved tokens "
             f"(median relative error per token against off):",
             f"- re-rotation rounding, layer-0 K: on {rounding['on_layer0_key']:.2e}, the same move unrounded "
             f"{rounding['move_unrounded_layer0_key']:.2e}, chunked {rounding['chunked_layer0_key']:.2e}",
             f"- outputs: chunked (the numerics floor) agreement {outputs['chunked']['greedy_agreement']:.3f}, "
             f"KL {outputs['chunked']['mean_kl']:.4f}; on agreement {outputs['on']['greedy_agreement']:.3f}, "
             f"KL {outputs['on']['mean_kl']:.4f}", "",
             "| layer | chunked K | on K | chunked V | on V |", "|---:|---:|---:|---:|---:|"]
    layers = diagnosis["layers"]
    shown = sorted({index for index in (0, 1, 2, len(layers) // 4, len(layers) // 2, 3 * len(layers) // 4,
                                        len(layers) - 1) if index < len(layers)})
    for row in (layers[index] for index in shown):
        lines.append(f"| {row['layer']} | {row['chunked_key']:.2e} | {row['on_key']:.2e} | "
                     f"{row['chunked_value']:.2e} | {row['on_value']:.2e} |")
    lines += ["", "| tokens after the seam | tokens | middle layer K chunked / on | last layer K chunked / on |",
              "|---|---:|---:|---:|"]
    for name, row in diagnosis["by_seam"].items():
        lines.append(f"| {name} | {row['tokens']} | {row['chunked_key_middle_layer']:.2e} / "
                     f"{row['on_key_middle_layer']:.2e} | {row['chunked_key_last_layer']:.2e} / "
                     f"{row['on_key_last_layer']:.2e} |")
    return "\n".join(lines)
