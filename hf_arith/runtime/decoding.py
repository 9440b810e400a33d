"""Batched greedy decoding with a KV cache, shared by `solve`, eval, verify and the CLI.

Generic autoregressive decoding: it knows nothing about arithmetic. Each row stops at the
end token; rows that have stopped are filled with the pad token. Models with several
prediction heads (`config.num_future_tokens` > 1) can emit up to that many tokens per forward
pass (`tokens_per_step`; the model returns the extra heads' logits as `future_logits`): by default
the extra heads draft and the first head verifies (`speculative_decode`), so the tokens are those
of one token per pass.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from .hardware import available_cpu_cores


class PreallocatedLayer(DynamicLayer):
    """A cache layer that writes into a buffer sized for the whole decode and hands out views of it.

    DynamicLayer grows by torch.cat, copying the whole cache at every step: at batch 4096 that copy
    cost more than the attention itself. The decoder knows the final length up front, so one buffer
    per layer suffices; the views it returns are what DynamicLayer would return.
    """

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity
        self.key_buffer = self.value_buffer = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.key_buffer = key_states.new_empty(*key_states.shape[:2], self.capacity, key_states.shape[-1])
        self.value_buffer = value_states.new_empty(*value_states.shape[:2], self.capacity, value_states.shape[-1])
        self.length = 0

    # Under torch.compile the buffer and its views would be aliased graph inputs, which inductor
    # rejects; the write stays outside the graph (a graph break per layer).
    @torch.compiler.disable
    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if self.key_buffer is None or end > self.capacity:  # past the stated length: grow from here on
            self.key_buffer = self.value_buffer = None
            return super().update(key_states, value_states)
        self.key_buffer[:, :, self.length:end] = key_states
        self.value_buffer[:, :, self.length:end] = value_states
        self.length = end
        self.keys, self.values = self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]
        return self.keys, self.values

    # Anything that edits the cache other than `update` (generate's reordering, cropping) works on
    # DynamicLayer's tensors, so the layer stops writing into its buffer first.
    def _stop_preallocating(self) -> None:
        self.key_buffer = self.value_buffer = None

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        # The decoder drops finished rows with this: select the buffers' rows and keep writing there.
        if self.key_buffer is None:
            super().batch_select_indices(indices)
            return
        self.key_buffer, self.value_buffer = self.key_buffer[indices], self.value_buffer[indices]
        self.keys, self.values = self.key_buffer[:, :, : self.length], self.value_buffer[:, :, : self.length]

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.batch_select_indices(beam_idx.to(self.keys.device) if self.is_initialized else beam_idx)

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._stop_preallocating()
        super().batch_repeat_interleave(repeats)

    def crop(self, tokens_to_remove: int) -> None:
        # The self-speculative decoder takes back rejected drafts: in the buffer, a shorter view.
        if self.key_buffer is not None and tokens_to_remove < 0:
            self.length = max(self.length + tokens_to_remove, 0)
            self.keys, self.values = self.key_buffer[:, :, : self.length], self.value_buffer[:, :, : self.length]
            return
        super().crop(tokens_to_remove)

    def select_positions(self, index: torch.Tensor) -> None:
        """Keep, in each row, the cached positions `index` [batch, n] names, in that order (the decoder
        squeezes out rejected drafts with it)."""
        if not self.is_initialized:
            return
        gather = index[:, None, :, None].expand(-1, self.keys.shape[1], -1, self.keys.shape[-1])
        keys, values = self.keys.gather(2, gather), self.values.gather(2, gather)
        if self.key_buffer is None:
            self.keys, self.values = keys, values
            return
        self.length = index.shape[1]
        self.key_buffer[:, :, : self.length], self.value_buffer[:, :, : self.length] = keys, values
        self.keys, self.values = self.key_buffer[:, :, : self.length], self.value_buffer[:, :, : self.length]

    def reset(self) -> None:
        self._stop_preallocating()
        super().reset()


def decoding_cache(capacity: int) -> DynamicCache:
    """A DynamicCache whose layers (created lazily, as many as the model writes) hold `capacity` tokens."""
    cache = DynamicCache()
    cache.layer_class_to_replicate = functools.partial(PreallocatedLayer, capacity)
    return cache


def widest_layer(model) -> int:
    """The model's largest activation width (hidden or MLP), which sets its per-row memory traffic."""
    config = model.config
    return max(getattr(config, "hidden_size", 1) or 1, getattr(config, "intermediate_size", 1) or 1)


def default_batch_size(model, tokens: int | None = None) -> int:
    """Rows per batch for batched decoding and scoring when the caller names none; with `tokens` (the
    longest sequence's prompt and answer), no more than `rows_within_budget` allows.

    On a GPU, as many as fit comfortably. On a CPU, per-step overhead favours big batches for tiny
    models, but once a batch's activations outgrow the cache, memory traffic costs more than the
    overhead saved: abacus-gpt2-add (width 256) ran its grid 1.6x faster at 128 rows than at 4096
    (bench/results/grid_batch_size_abacus-gpt2-add.md), while the 720-parameter minimal-add10
    verified fastest at 16384 (bench/results/verify_speed.json). So rows scale inversely with
    the model's widest layer.
    """
    if next(model.parameters()).is_cuda:
        rows = 4096
    else:
        rows = int(min(4096, max(64, 2**15 // widest_layer(model))))
    return rows if tokens is None else min(rows, rows_within_budget(model, tokens))


# The memory one batch of a pass over long sequences may take beside the weights, in bytes. Batches
# are cut to fit it (`rows_within_budget`, `row_chunks`), so that memory grows with the chunk, not the
# batch: 1,000 problems of 1,000 digits run a few rows at a time rather than allocating every row's
# attention at once. 1 GiB keeps an evaluation well under the 4 GiB that #52 allows a command, on a
# CPU as on a GPU; short sequences are bounded by the row counts of `default_batch_size` instead.
BATCH_MEMORY_BUDGET = 1 << 30
# What one row of T tokens takes in a pass over all of them (teacher forcing, prefill; a decoding step
# with its KV cache takes less): PAIR_BYTES per (query, key) pair plus TOKEN_BYTES per token per unit of
# the widest layer. Measured peak resident memory (bench/results/chunk_memory.json): the
# abacus-gpt2-add-window-10-k2 architecture (width 256, sdpa, an additive window mask) takes 140 MiB
# a row at 3,004 tokens in the teacher-forced pass and 63 MiB decoding, about 16 bytes a pair (the
# float mask and the boolean masks it is built from); the estimate, 161 MiB, is above every
# measurement from 364 tokens up. Eager attention also holds every head's scores and their softmax,
# 8 bytes a pair per head.
PAIR_BYTES = 16
TOKEN_BYTES = 32
# A line window with relation bias (abacus_relation_bias) also holds each pair's relation code and every
# head's bias for it: one teacher-forced pass over a 20-item sort of 6 digits (5,100 tokens) peaked at 50,
# 77 and 76 bytes a pair with 2, 4 and 8 heads, and at 75 with 4 heads at 10 digits (8,460 tokens; random
# weights, one thread; bench/results/chunk_memory.json's sort_spans measures the 4-head model).
RELATION_PAIR_BYTES = 64


def pair_bytes(model) -> int:
    """The bytes one (query, key) pair is estimated to take in a forward pass (see PAIR_BYTES)."""
    config = model.config
    pair = PAIR_BYTES
    if getattr(config, "_attn_implementation", None) == "eager":
        pair += 8 * (getattr(config, "num_attention_heads", 1) or 1)
    if getattr(config, "abacus_relation_bias", False):
        pair += RELATION_PAIR_BYTES
    return pair


def row_bytes(model, tokens: int) -> int:
    """The bytes one row of `tokens` tokens is estimated to take in a forward pass over all of them."""
    return int(tokens) ** 2 * pair_bytes(model) + int(tokens) * TOKEN_BYTES * widest_layer(model)


def decode_row_bytes(model, prompt: int, tokens: int) -> int:
    """The bytes one row is estimated to take in cached decoding to `tokens` tokens: its prompt's prefill
    (a pass over the prompt) and, per token, its cached keys and values and a step's mask over every key.
    A long answer after a short prompt takes far less than a pass over both: a sorted list of 20 items
    of 20 digits is 460 prompt tokens of 16,860."""
    return row_bytes(model, prompt) + int(tokens) * (TOKEN_BYTES * widest_layer(model) + pair_bytes(model))


def query_span(model, rows: int, tokens: int) -> int:
    """How many columns of `rows` sequences of `tokens` tokens one pass may take as queries, the columns
    before them read from a KV cache, within BATCH_MEMORY_BUDGET: all of them when a whole pass fits,
    at least one."""
    per_query = int(rows) * (int(tokens) * pair_bytes(model) + TOKEN_BYTES * widest_layer(model))
    return int(max(1, min(int(tokens), BATCH_MEMORY_BUDGET // per_query)))


def rows_within_budget(model, tokens: int) -> int:
    """How many rows of `tokens` tokens (prompt and answer) one pass over them may hold: BATCH_MEMORY_BUDGET's
    worth by `row_bytes`, at least one (`row_chunks` applies the same rule row by row)."""
    return max(1, BATCH_MEMORY_BUDGET // row_bytes(model, tokens))


def row_chunks(tokens, model, batch_size: int | None = None, prompts=None) -> Iterator[slice]:
    """Consecutive slices of rows whose sequences are `tokens` long (prompt and answer budget each), for
    batched decoding and scoring: windows of `batch_size` rows (default: `default_batch_size(model)`;
    what `limits.check_problems` checks against the context), each cut into chunks of as many rows as
    fit BATCH_MEMORY_BUDGET (one at least), each row costing a pass over its sequence (`row_bytes`), or
    with `prompts` (each row's prompt tokens, for cached decoding) `decode_row_bytes`. Rows sorted by
    length get chunks sized to their own length."""
    tokens = [int(t) for t in tokens]
    cost = [row_bytes(model, t) for t in tokens] if prompts is None else \
        [decode_row_bytes(model, int(p), t) for p, t in zip(prompts, tokens)]
    cap = int(batch_size or default_batch_size(model))
    for window in range(0, len(tokens), cap):
        start, end = window, min(window + cap, len(tokens))
        while start < end:
            # The most rows from `start` that their own costliest row allows: a longer chunk only has
            # costlier rows, so the sizes that fit run from 1 up to that one, and a bisection finds it.
            low, high = 1, end - start
            while low < high:
                mid = (low + high + 1) // 2
                if mid * max(cost[start : start + mid]) <= BATCH_MEMORY_BUDGET:
                    low = mid
                else:
                    high = mid - 1
            yield slice(start, start + low)
            start += low


def default_threads(model) -> int:
    """Torch CPU threads for batched decoding and scoring when the caller names none.

    Tiny models (widest layer under 128) take one: their steps are mostly per-op overhead, and on
    a shared 2-core machine two threads made minimal-add10 many times slower
    (bench/results/threads.md). Wider models take every available core: the 30x30 grid of the
    first-stage abacus-gpt2-add (width 256) ran 1.8x faster on two threads than on one
    (bench/results/eval_grid_abacus-gpt2-add-first-stage*.json).
    """
    if widest_layer(model) < 128:
        return 1
    return available_cpu_cores()


def can_retire_rows(model_kwargs: dict, batch: int) -> bool:
    """Rows may be regrouped or dropped unless a per-row tensor among the model's kwargs would have to follow."""
    return not any(torch.is_tensor(v) and v.dim() and v.shape[0] == batch for v in model_kwargs.values())


def _step_logits(out, tokens_per_step: int) -> torch.Tensor:
    """The last position's logits of each head used this step: [batch, tokens_per_step, vocab]."""
    first = out.logits[:, -1:]
    if tokens_per_step == 1:
        return first
    return torch.cat([first, out.future_logits[:, -1, : tokens_per_step - 1]], dim=1)


def token_probabilities(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The probability the model gave each chosen token: softmax of `logits` [..., vocab] at `tokens` [...]."""
    return logits.float().softmax(-1).gather(-1, tokens[..., None])[..., 0]


def prefill_buckets(lengths: list[int], max_buckets: int = 4, call_cost: int = 256) -> list[int]:
    """Bucket boundaries for prefilling left-padded prompts of these real lengths.

    Returns the ascending prompt lengths that close each bucket: rows whose length is at most a
    boundary (and above the previous one) are prefilled together, padded to that boundary. Chosen
    by a small dynamic programme over the distinct lengths that minimises the tokens computed plus
    `call_cost` tokens per forward call (its fixed overhead), with at most `max_buckets` calls:
    evaluation batches mix 1- to 10-digit operands, and padding every prompt to the longest one
    made 40% of abacus-gpt2-add's prefill tokens padding (bench/results/prefill_padding.md).
    Small batches stay in one call.
    """
    counts: dict[int, int] = {}
    for n in lengths:
        counts[n] = counts.get(n, 0) + 1
    distinct = sorted(counts)
    below = [0]  # rows with length <= distinct[i - 1]
    for n in distinct:
        below.append(below[-1] + counts[n])
    inf = float("inf")
    # best[b][i]: fewest padded tokens covering the first i distinct lengths with b buckets
    best = [[inf] * (len(distinct) + 1) for _ in range(max_buckets + 1)]
    choice = [[0] * (len(distinct) + 1) for _ in range(max_buckets + 1)]
    best[0][0] = 0
    for b in range(1, max_buckets + 1):
        for i in range(1, len(distinct) + 1):
            for j in range(i):  # the bucket holds distinct lengths j .. i - 1, padded to distinct[i - 1]
                cost = best[b - 1][j] + (below[i] - below[j]) * distinct[i - 1]
                if cost < best[b][i]:
                    best[b][i], choice[b][i] = cost, j
    b = min(range(1, max_buckets + 1), key=lambda k: (best[k][-1] + k * call_cost, k))
    bounds, i = [], len(distinct)
    while i:
        bounds.append(distinct[i - 1])
        i, b = choice[b][i], b - 1
    return bounds[::-1]


class _LastLogits:
    """The first step's outputs of a bucketed prefill, reassembled in row order."""

    def __init__(self, logits, future_logits):
        self.logits, self.future_logits = logits, future_logits


def bucketed_prefill(model, input_ids, attention_mask, cache, extra: dict, positions_of, tokens_per_step: int):
    """Prefill left-padded prompts in a few buckets of similar length; fill `cache` as one padded pass would.

    Each bucket runs on the last columns of its rows only (the rest is padding), so its forward
    pass computes little or no padding; its keys and values land right-aligned in the shared
    cache, whose padding columns stay zero and masked, exactly where a single padded prefill puts
    them. Returns the last position's logits for every row (and the extra heads' when decoding
    several tokens per step), or None when one bucket is best (then nothing has run).
    """
    batch, width = input_ids.shape
    lengths = attention_mask.sum(1)
    bounds = prefill_buckets(lengths.tolist())
    if len(bounds) == 1:
        return None
    logits = future = None
    for low, high in zip([0] + bounds[:-1], bounds):
        rows = ((lengths <= high) & (lengths > low)).nonzero().squeeze(1)
        ids, mask = input_ids[rows, width - high:], attention_mask[rows, width - high:]
        kwargs = dict(extra)
        if positions_of is not None:
            kwargs.update(positions_of(ids, ids.shape[1], generated_from=ids.shape[1]))
        part = DynamicCache()
        out = model(input_ids=ids, attention_mask=None if bool(mask.all()) else mask, past_key_values=part,
                    use_cache=True, logits_to_keep=1, **kwargs)
        if logits is None:
            # The shared cache in the padded layout, one layer per layer the model wrote. Padding
            # columns hold zeros (masked, but they must be finite for the masked softmax).
            for i, layer in enumerate(part.layers):
                shape = (batch, layer.keys.shape[1], width, layer.keys.shape[-1])
                cache.update(layer.keys.new_zeros(shape), layer.values.new_zeros(shape), i)
            logits = out.logits.new_empty(batch, *out.logits.shape[1:])
            if tokens_per_step > 1:
                future = out.future_logits.new_empty(batch, *out.future_logits.shape[1:])
        for layer, target in zip(part.layers, cache.layers):
            # `target.keys` is a view of the layer's storage, so these writes land in the cache.
            target.keys[rows, :, width - high:] = layer.keys
            target.values[rows, :, width - high:] = layer.values
        logits[rows] = out.logits
        if future is not None:
            future[rows] = out.future_logits
    return _LastLogits(logits, future)


# On a CPU, a batch of many rows is bound by arithmetic: a speculative pass (k tokens through the trunk
# and the extra heads) costs 1.6x a one-token pass at 128 rows for 0.51x the passes, 0.94-0.97x the
# speed, where one row decodes 1.31-1.34x faster (bench/results/speculative_speed.md) and 16 rows gain
# 1.00-1.08x (bench/results/decode_profile.md). The answers are the same either way, so by default bigger CPU
# batches decode one token per pass.
SPECULATE_MAX_CPU_ROWS = 16


def max_tokens_per_step(model) -> int:
    """How many tokens one forward pass of `model` can predict (its number of output heads)."""
    return int(getattr(model.config, "num_future_tokens", 1) or 1)


def default_tokens_per_step(model, rows: int) -> int:
    """Tokens per pass when the caller names none: every head of a multi-token model (drafted and
    verified, so the answers are one token per pass's) where that is faster, else one."""
    heads = max_tokens_per_step(model)
    if heads == 1 or (not next(model.parameters()).is_cuda and rows > SPECULATE_MAX_CPU_ROWS):
        return 1
    return heads


@torch.inference_mode()
def greedy_decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, max_new_tokens: int,
                  eos_token_id: int | None = None, pad_token_id: int = 0, use_cache: bool = True,
                  tokens_per_step: int = 1, model_kwargs: dict | None = None, return_passes: bool = False,
                  return_probabilities: bool = False, confirm: bool = True):
    """Generate up to `max_new_tokens` greedily; returns only the new tokens, [batch, <= max_new_tokens].

    `model_kwargs` go to every forward call (e.g. `num_recurrences` for looped models). With
    `return_probabilities`, returns (tokens, probabilities): the probability the model gave each
    token it wrote, same shape, 1.0 after a row's end token. With `return_passes`, the number of
    forward passes comes last: (tokens, passes) or (tokens, probabilities, passes). The caller has checked its
    input against the model's limits (`hf_arith.runtime.limits`): `tokens_per_step` at most the model's
    output heads, prompt + `max_new_tokens` within its context.

    `tokens_per_step` > 1 uses a multi-token model's extra heads. With `confirm` (the default) they
    only draft and the first head verifies (`speculative_decode`): the tokens and probabilities are
    those of one token per pass (without a cache, it decodes one token per pass). `confirm=False`
    writes the heads' own tokens, `tokens_per_step` per pass: fewer passes, but not the first head's
    answers.
    """
    if tokens_per_step > 1 and confirm and use_cache and max_new_tokens > 1:  # one token: the prompt pass alone
        tokens, probabilities, passes = speculative_decode(
            model, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, tokens_per_step,
            model_kwargs, return_probabilities=return_probabilities)
    else:
        tokens, probabilities, passes = _stepwise_decode(
            model, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, use_cache,
            1 if confirm else tokens_per_step, model_kwargs, return_probabilities)
    outputs = [tokens, *([probabilities] if return_probabilities else []), *([passes] if return_passes else [])]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _stepwise_decode(model, input_ids, attention_mask, max_new_tokens: int, eos_token_id, pad_token_id: int,
                     use_cache: bool, tokens_per_step: int, model_kwargs, return_probabilities: bool):
    """`greedy_decode` writing the `tokens_per_step` heads' own tokens every pass (one: the first head's).
    Returns (tokens, probabilities or None, passes)."""
    batch = input_ids.shape[0]
    extra = dict(model_kwargs or {})
    if tokens_per_step > 1:
        extra["num_future_tokens"] = tokens_per_step
    if attention_mask is not None and bool(attention_mask.all()):
        # No padding: without a mask the model needs no mask at all for one-token steps.
        attention_mask = None
    # Rows may be regrouped (bucketed prefill) and finished ones leave the batch, unless a per-row
    # tensor among the model's kwargs would have to follow them.
    rows_movable = can_retire_rows(extra, batch)
    can_retire = eos_token_id is not None and rows_movable
    cache = decoding_cache(input_ids.shape[1] + max_new_tokens) if use_cache else None
    # Models whose positions depend on the whole sequence (abacus ids) get them computed from it.
    positions_of = getattr(model, "position_inputs", None)
    result = input_ids.new_full((batch, max_new_tokens), pad_token_id)
    probabilities = torch.ones(result.shape, device=input_ids.device) if return_probabilities else None
    rows = None  # the original row of each row still decoding; None while all are
    sequence = input_ids
    finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
    step_input, produced, passes = input_ids, 0, 0
    # Padded prompts of mixed lengths: prefill in buckets of similar length (needs the cache).
    out = None
    if use_cache and attention_mask is not None and rows_movable:
        out = bucketed_prefill(model, input_ids, attention_mask, cache, extra, positions_of, tokens_per_step)
    while produced < max_new_tokens:
        if out is None:
            if positions_of is not None:
                extra.update(positions_of(sequence, step_input.shape[1], generated_from=input_ids.shape[1]))
            out = model(input_ids=step_input, attention_mask=attention_mask, past_key_values=cache,
                        use_cache=use_cache, logits_to_keep=1, **extra)
        passes += 1
        logits = _step_logits(out, tokens_per_step)[:, : max_new_tokens - produced]
        step = logits.argmax(-1)
        chosen = None if probabilities is None else token_probabilities(logits, step).masked_fill(finished[:, None], 1.0)
        step = _stop_at_end(step, finished, eos_token_id, pad_token_id)
        span = slice(produced, produced + step.shape[1])
        if rows is None:
            result[:, span] = step
        else:
            result[rows, span] = step
        if chosen is not None:
            _record_probabilities(probabilities, rows, span, chosen, step, eos_token_id)
        produced += step.shape[1]
        if eos_token_id is None:
            done = 0
        else:
            done = int(finished.sum())  # the step's one host sync
            if done == finished.shape[0]:
                break
        if attention_mask is not None:
            attention_mask = torch.cat([attention_mask, torch.ones_like(step)], dim=1)
        if positions_of is not None or not use_cache:
            sequence = torch.cat([sequence, step], dim=1)
        if can_retire and done * 4 >= finished.shape[0]:
            # A quarter of the rows are done: drop them, so the model stops computing answers that
            # are already complete (generate() carries them to the end). Rows are independent, so
            # the others' tokens do not change; copying the cache a few times costs less than that.
            keep = (~finished).nonzero().squeeze(1)
            rows = keep if rows is None else rows[keep]
            finished, step, sequence, attention_mask = _keep_rows(keep, cache, finished, step, sequence, attention_mask)
        # With a cache the model needs only the new tokens; without one, the whole sequence again.
        step_input = step if use_cache else sequence
        out = None
    return result[:, :produced], None if probabilities is None else probabilities[:, :produced], passes


def _stop_at_end(step, finished, eos_token_id, pad_token_id):
    """A row stops at its first end token, also inside a step: what it writes after it is padding.
    Updates `finished` in place."""
    columns = []
    for column in step.unbind(1):
        column = column.masked_fill(finished, pad_token_id)
        columns.append(column)
        if eos_token_id is not None:
            finished |= column == eos_token_id
    return columns[0][:, None] if len(columns) == 1 else torch.stack(columns, dim=1)


def _record_probabilities(probabilities, rows, span: slice, chosen, step, eos_token_id) -> None:
    """Write a step's token probabilities into `probabilities` (at `rows`, all rows when None); tokens
    after an end token written inside the step are padding and count as certain."""
    after_end = (step == eos_token_id).long().cumsum(1) - (step == eos_token_id).long() > 0 \
        if eos_token_id is not None else torch.zeros_like(step, dtype=torch.bool)
    chosen = chosen.masked_fill(after_end, 1.0)
    if rows is None:
        probabilities[:, span] = chosen
    else:
        probabilities[rows, span] = chosen


def _keep_rows(keep, cache, *tensors):
    """The rows `keep` of each per-row tensor (None stays None), and of the cache in place."""
    if cache is not None:
        cache.batch_select_indices(keep)
    return tuple(None if x is None else x[keep] for x in tensors)


# -- self-speculative decoding: the extra heads draft, the first head verifies ------------------------
class _Speculation:
    """The rows still decoding in `speculative_decode`, with their cache and their tokens so far.

    The cache is laid out in columns shared by all rows: the left-padded prompt, then one block of
    fed tokens per pass. A block column that holds a rejected draft is a hole, hidden by the row's
    attention mask (`mask`), so rows may accept different numbers of drafts without moving any
    cache entry; trailing columns that are holes in every row are cut off instead, and when the
    cache would outgrow the model's context, `compact` squeezes the holes out. Position ids are
    computed from each row's own tokens (`sequence`: the prompt, the tokens written, then the
    pending drafts), never from cache columns.
    """

    def __init__(self, model, input_ids, attention_mask, max_new_tokens: int, k: int, eos, pad, extra: dict,
                 commit: str, scored: bool):
        batch, self.width = input_ids.shape
        self.model, self.k, self.eos, self.pad, self.max_new, self.commit = model, k, eos, pad, max_new_tokens, commit
        self.extra = {**extra, "num_future_tokens": k}
        self.positions_of = getattr(model, "position_inputs", None)
        context = getattr(model.config, "max_position_embeddings", None)
        self.room = min(self.width + k * max_new_tokens, context or self.width + k * max_new_tokens)  # cache columns
        self.cache = decoding_cache(self.room)
        device = input_ids.device
        self.after = torch.arange(k, device=device)
        self.rows = torch.arange(batch, device=device)  # the original row of each row still decoding
        self.sequence = torch.cat([input_ids, input_ids.new_full((batch, max_new_tokens + k), pad)], dim=1)
        self.chances = torch.ones(batch, max_new_tokens + k, device=device) if scored else None  # probabilities
        self.produced = input_ids.new_zeros(batch)
        self.ended = torch.zeros(batch, dtype=torch.bool, device=device)
        self.mask = input_ids.new_zeros((batch, self.room))
        self.mask[:, : self.width] = 1 if attention_mask is None else attention_mask
        self.key_positions = None  # cache columns' position ids, for models that read every key's
        self.length, self.longest = self.width, 0  # cache columns in use; most tokens any row has written
        self.tokens = input_ids.new_full((batch, max_new_tokens), pad)  # what decoding returns, in row order
        self.probabilities = torch.ones(self.tokens.shape, device=device) if scored else None

    def prefill(self, attention_mask, rows_movable: bool) -> int:
        """The prompt pass: its first token and first drafts. Returns how many rows are done."""
        out, kwargs, prompt = None, {}, self.sequence[:, : self.width]
        if attention_mask is not None and rows_movable:
            out = bucketed_prefill(self.model, prompt, attention_mask, self.cache, self.extra, self.positions_of, self.k)
        if self.positions_of is not None:
            kwargs = self.positions_of(prompt, self.width, generated_from=self.width)
            if "key_position_ids" in kwargs:
                self.key_positions = prompt.new_zeros((len(self.rows), self.room))
                self.key_positions[:, : self.width] = kwargs["key_position_ids"]
        if out is None:
            out = self.model(input_ids=prompt, attention_mask=attention_mask, past_key_values=self.cache,
                             use_cache=True, logits_to_keep=1, **self.extra, **kwargs)
        logits = out.logits[:, -1:]
        self._write(logits.argmax(-1), self.produced.new_zeros(len(self.rows)), logits, out.future_logits[:, -1:])
        done, self.longest = torch.stack([self._done().sum(), self.produced.max()]).tolist()
        return done

    def _done(self) -> torch.Tensor:
        return self.ended | (self.produced >= self.max_new)

    def step(self) -> int:
        """One pass over every row's block: verify its drafts, write what is right, draft on. Returns the rows done."""
        if self.length + self.k > self.room:
            self.compact()
        s, start = min(self.k, self.room - self.length), self.length  # fewer drafts only at the end of the context
        block, columns = self.step_input[:, :s], slice(start, start + s)
        self.mask[:, columns] = 1
        out = self.model(input_ids=block, attention_mask=self.mask[:, : start + s], past_key_values=self.cache,
                         use_cache=True, logits_to_keep=s, **self.extra, **self._positions(s, start))
        first = out.logits.argmax(-1)  # what one token per pass writes after each fed token, if those before are right
        agree = (first[:, :-1] == block[:, 1:]).cumprod(1).sum(1)  # drafts accepted
        if self.commit == "min":  # every row keeps as many as the row that kept fewest
            agree = agree.masked_fill(self._done(), s - 1).min().expand_as(agree)
        # The block's columns the rows keep: one per token written (its predecessor's); none in finished rows.
        kept = self._write(first, agree, out.logits, out.future_logits)
        done, most, self.longest = torch.stack([self._done().sum(), kept.max(), self.produced.max()]).tolist()
        if most < s:  # columns that are holes in every row: cut them off
            self.cache.crop(most - s)
        self.mask[:, columns] = self.after[:s] < kept[:, None]
        self.length = start + most
        return done

    def _positions(self, s: int, start: int) -> dict:
        """The position kwargs of a block of `s` tokens fed at cache column `start`."""
        if self.positions_of is None:
            return {}
        sequence = self.sequence[:, : self.width + self.longest + s - 1]
        full = self.positions_of(sequence, sequence.shape[1], generated_from=self.width)["position_ids"]
        kwargs = {"position_ids": full.gather(1, (self.width - 1 + self.produced)[:, None] + self.after[:s])}
        if self.key_positions is not None:
            self.key_positions[:, start:start + s] = kwargs["position_ids"]
            kwargs["key_position_ids"] = self.key_positions[:, : start + s]
        return kwargs

    def _write(self, first, agree, logits, future) -> torch.Tensor:
        """Write each row's first-head tokens `first[:, :agree + 1]` with their probabilities (none past its end
        token or budget), and set up its next block: the last of them, then the heads' drafts there.
        Returns how many tokens each row wrote."""
        s, index = first.shape[1], torch.arange(len(self.rows), device=first.device)
        room = (self.max_new - self.produced).clamp(max=s).masked_fill_(self.ended, 0)  # budget left; none if ended
        valid = self.after[:s] < torch.minimum(agree + 1, room)[:, None]
        if self.eos is not None:
            end = (first == self.eos) & valid
            valid &= end.cumsum(1) <= end  # nothing after the first end token
            self.ended |= end.any(1)
        columns = (self.width + self.produced)[:, None] + self.after[:s]
        self.sequence.scatter_(1, columns, torch.where(valid, first, self.pad))
        if self.chances is not None:
            self.chances.scatter_(1, columns - self.width, torch.where(valid, token_probabilities(logits, first), 1.0))
        written = valid.sum(1)
        self.produced += written
        drafts = torch.where(self.ended[:, None], self.pad, future[index, agree].argmax(-1))
        self.step_input = torch.cat([first[index, agree][:, None], drafts], dim=1)
        self.sequence.scatter_(1, (self.width + self.produced)[:, None] + self.after[: self.k - 1], drafts)
        return written

    def compact(self) -> None:
        """Squeeze the holes out of the cache: each row's cached tokens move, in order, to the end of its row."""
        real = self.mask[:, : self.length]
        keep = int(real.sum(1).max())
        if keep == self.length:  # no hole to squeeze out (the last tokens of a full context)
            return
        index = real.sort(dim=1, stable=True).indices[:, self.length - keep:]
        for layer in self.cache.layers:
            layer.select_positions(index)
        self.mask[:, :keep] = real.gather(1, index)
        if self.key_positions is not None:
            self.key_positions[:, :keep] = self.key_positions[:, : self.length].gather(1, index)
        self.length = keep

    def flush(self) -> None:
        """Copy the rows' tokens so far to the returned tokens, at their original rows."""
        self.tokens[self.rows] = self.sequence[:, self.width: self.width + self.max_new]
        if self.probabilities is not None:
            self.probabilities[self.rows] = self.chances[:, : self.max_new]

    def retire(self) -> None:
        """Drop the rows that are done (their tokens are kept) from every per-row tensor and the cache."""
        self.flush()
        keep = (~self._done()).nonzero().squeeze(1)
        self.cache.batch_select_indices(keep)
        for name in ("rows", "sequence", "chances", "produced", "ended", "mask", "key_positions", "step_input"):
            if getattr(self, name) is not None:
                setattr(self, name, getattr(self, name)[keep])


@torch.inference_mode()
def speculative_decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, max_new_tokens: int,
                       eos_token_id: int | None = None, pad_token_id: int = 0, tokens_per_step: int = 2,
                       model_kwargs: dict | None = None, commit: str = "row", return_probabilities: bool = True):
    """Greedy decoding of a multi-token model in fewer passes, writing what one token per pass writes.

    Each pass feeds every row its last token and the `tokens_per_step` - 1 tokens the extra heads
    drafted after it. The first head's argmax after each fed token is the token one-token decoding
    writes there, provided the tokens before it are right, so a draft is accepted while it equals
    the first head's token before it. A pass writes the first head's tokens up to the first rejected
    draft (1 to `tokens_per_step` of them), and from its last accepted position the heads draft the
    next ones, so no pass only checks. Probabilities are the first head's, as one token per pass
    reports them. `commit="row"`: each row keeps what it accepted (rejected drafts become masked
    holes in the cache, `_Speculation`); `"min"`: every row keeps as many as the row that accepted
    fewest, so the cache is cut back evenly (compared in bench/speculative_speed.py).
    Returns (tokens, probabilities, passes), as `greedy_decode` with both flags (probabilities None
    unless `return_probabilities`).
    """
    if commit not in ("row", "min"):
        raise ValueError(f"commit must be 'row' or 'min', got {commit!r}")
    extra = dict(model_kwargs or {})
    rows_movable = can_retire_rows(extra, input_ids.shape[0])
    state = _Speculation(model, input_ids, attention_mask, max_new_tokens, tokens_per_step, eos_token_id,
                         pad_token_id, extra, commit, return_probabilities)
    done, passes = state.prefill(attention_mask, rows_movable), 1
    longest = state.longest
    while done < len(state.rows):
        done, passes = state.step(), passes + 1
        longest = max(longest, state.longest)
        if rows_movable and done * 4 >= len(state.rows) and done < len(state.rows):
            # A quarter of the rows are done: drop them, as one-token decoding does (`greedy_decode`).
            state.retire()
            done = 0
    state.flush()
    return state.tokens[:, :longest], None if state.probabilities is None else state.probabilities[:, :longest], passes


# -- teacher-forced scoring -------------------------------------------------------------------
@torch.inference_mode()
def forced_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                  model_kwargs: dict | None = None) -> torch.Tensor:
    """The first head's logits [batch, T, vocab] of one teacher-forced pass over whole sequences.

    Where that pass would take more than BATCH_MEMORY_BUDGET (`query_span`: even one row of a 20-item
    sort of 20 digits, 16,860 tokens, took 21 GB in one pass) and the model computes its positions from
    the whole sequence (`position_inputs`, the abacus and looped families), it runs as a chunked
    prefill: spans of columns in turn, each reading the columns before it from a KV cache, all with
    the position ids one pass computes. Every query sees the keys it sees in one pass, so the logits
    are the same, and memory grows with the span, not the square of the sequence.
    """
    extra = dict(model_kwargs or {})
    batch, width = input_ids.shape
    span = query_span(model, batch, width)
    positions_of = getattr(model, "position_inputs", None)
    if span >= width or positions_of is None:
        return model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **extra).logits
    if attention_mask is not None and bool(attention_mask.all()):
        attention_mask = None
    whole = positions_of(input_ids, width, generated_from=width)  # every column's, none of them generated
    cache = decoding_cache(width)
    logits = []
    for start in range(0, width, span):
        end = min(start + span, width)
        # the new columns' positions; the keys' (with a window) are every column's up to the span's end
        positions = {name: ids[:, :end] if name == "key_position_ids" else ids[:, start:end]
                     for name, ids in whole.items()}
        out = model(input_ids=input_ids[:, start:end], past_key_values=cache, use_cache=True,
                    attention_mask=None if attention_mask is None else attention_mask[:, :end], **positions, **extra)
        logits.append(out.logits)
    return torch.cat(logits, dim=1)


@torch.inference_mode()
def forced_scores(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, scored: torch.Tensor,
                  model_kwargs: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One teacher-forced pass over whole sequences, read with the first head.

    Returns (log_probabilities [batch, T - 1], agrees [batch]): the model's log-probability of
    every token after the first given the tokens before it, and whether each row's `scored`
    tokens ([batch, T - 1], True where scored) are all its argmax there. Greedy decoding one
    token per pass then writes exactly those tokens: it follows the same path step by step (up
    to floating-point ties).
    """
    logits = forced_logits(model, input_ids, attention_mask, model_kwargs)
    logits, targets = logits[:, :-1], input_ids[:, 1:]  # column c - 1 scores the token at column c
    log_probabilities = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets[..., None])[..., 0]
    agrees = ((logits.argmax(-1) == targets) | ~scored).all(1)
    return log_probabilities, agrees
