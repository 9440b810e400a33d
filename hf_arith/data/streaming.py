"""Infinite, seeded training data for the Trainer, drawn from the problem generator.

Examples are generated in vectorized chunks and padded to one fixed length (the longest
problem the digit range allows), so batches have a constant shape: cheap to collate, and safe
for accelerate's batch dispatch across processes.

The stream is a pure function of (seed, rank, worker, position): chunk `k` is drawn from its
own generator seeded `[seed, rank, worker, k]`, and with a curriculum schedule each example's
digit range is that of the global step it belongs to (position // examples per step). So a
resumed run starts at `start_step` and sees exactly the examples an uninterrupted run would
have seen, and the phase switches at the step the recipe names, whatever the prefetching.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .formatting import NumberFormat, Problems, render, render_answers
from .problems import ProblemSpec, sample, with_answers, with_items_moved
from .tokenization_arith import LABEL_IGNORE


@dataclass
class CurriculumState:
    """The digit range the stream draws from, shared with the curriculum callback.

    Without a `schedule`, the stream reads `min_digits`/`max_digits` whenever it generates a
    chunk (move them by hand). With a `schedule` (global step -> (min_digits, max_digits)) and
    `examples_per_step` (the global batch), each example's range follows from its position, and
    the stream starts at example `start_step * examples_per_step` (set on resume).
    """

    min_digits: int
    max_digits: int
    schedule: Callable[[int], tuple[int, int]] | None = None
    examples_per_step: int = 0
    start_step: int = 0


def worst_case_length(spec: ProblemSpec, fmt: NumberFormat) -> int:
    """Token length of the longest example the spec can produce (prompt, answer and <eos>)."""
    k = spec.n_operands
    operands = np.full((1, k, spec.max_digits), spec.base - 1, dtype=np.int8)
    lengths = np.full((1, k), spec.max_digits)
    problems = with_answers(Problems(spec.task, spec.base, operands, lengths))
    _, _, prompt = render(problems, fmt, with_answer=False)
    return int(prompt[0]) + fmt.max_answer_tokens(problems)


def has_padding(spec: ProblemSpec, fmt: NumberFormat) -> bool:
    """Whether examples can differ in length (else every row is exactly `worst_case_length`)."""
    k = spec.n_operands
    shortest = with_answers(Problems(spec.task, spec.base, np.zeros((1, k, 1), dtype=np.int8),
                                     np.ones((1, k), dtype=np.int64)))
    ids, _, _ = render(shortest, fmt, with_answer=True)
    return ids.shape[1] != worst_case_length(spec, fmt) or spec.task_rules.item_list


def pack_rows(ids: np.ndarray, lengths: np.ndarray, answer: np.ndarray, sizes: np.ndarray, pad_id: int):
    """Packed sequences: row i is the first `sizes[i]` of its group of `len(ids) // len(sizes)` consecutive
    rendered problems, one after another (each ends with its own <eos>). Returns (ids, lengths, answer)."""
    n, width = ids.shape
    rows = len(sizes)
    group = n // rows
    valid = (np.arange(width)[None, :] < lengths[:, None]).reshape(rows, group, width)
    valid &= np.arange(group)[None, :, None] < sizes[:, None, None]
    valid = valid.reshape(rows, group * width)
    packed_lengths = valid.sum(1)
    order = np.argsort(~valid, axis=1, kind="stable")[:, : packed_lengths.max()]  # valid tokens first, in order
    inside = np.arange(order.shape[1])[None, :] < packed_lengths[:, None]
    packed = np.where(inside, np.take_along_axis(ids.reshape(rows, -1), order, axis=1), pad_id)
    return packed, packed_lengths, np.take_along_axis(answer.reshape(rows, -1), order, axis=1) & inside


def encode_examples(problems: Problems, fmt: NumberFormat, length: int, rng: np.random.Generator | None = None,
                    pack_sizes: np.ndarray | None = None):
    """input_ids, attention_mask and labels (answer tokens only), right-padded to `length`.

    With `rng`, each example is moved right by a random number of attended <pad> tokens (filler),
    drawn uniformly from what fits in `length`. With `pack_sizes`, example i packs the first
    `pack_sizes[i]` problems of its group (`pack_rows`); every answer in it is a label.
    """
    ids, lengths, answer = render_answers(problems, fmt)
    pad_id = fmt.token_id("<pad>")
    if pack_sizes is not None:
        ids, lengths, answer = pack_rows(ids, lengths, answer, pack_sizes, pad_id)
    n, width = ids.shape
    if width > length:
        raise ValueError(f"examples of {width} tokens exceed the fixed length {length}")
    shift = np.zeros(n, dtype=np.int64) if rng is None else rng.integers(0, length - lengths + 1)
    cols = np.arange(length)[None, :]
    source = cols - shift[:, None]  # column of `ids` that lands in each output column
    inside = (source >= 0) & (source < lengths[:, None])
    input_ids = np.where(inside, np.take_along_axis(ids, source.clip(0, width - 1), axis=1), pad_id)
    attention_mask = (source < lengths[:, None]).astype(np.int64)  # the filler is attended, right padding not
    labels = np.where(np.take_along_axis(answer, source.clip(0, width - 1), axis=1) & inside, input_ids, LABEL_IGNORE)
    return input_ids, attention_mask, labels


def stack_examples(features: list[dict]) -> dict:
    """Collate fixed-length examples by stacking (the tokenizer's pad() is far slower and not needed)."""
    return {key: torch.from_numpy(np.stack([f[key] for f in features])) for key in features[0]}


class ProblemStream(torch.utils.data.IterableDataset):
    """Endless training examples. Each (seed, rank, worker) gets its own random stream, in numbered chunks."""

    def __init__(self, spec: ProblemSpec, fmt: NumberFormat, state: CurriculumState | None = None,
                 seed: int = 0, rank: int = 0, chunk_size: int = 2048, test_fraction: float = 0.1,
                 random_prefix: int = 0, hard_fraction: float = 0.0, context_problems: int = 0,
                 hard_fraction_fade: tuple[int, int] | None = None, hard_kind: str = "hard",
                 mined: Problems | None = None, mined_fraction: float = 0.0, length_buckets: int = 0,
                 item_places: int = 0, item_spread: bool = False):
        self.spec, self.fmt, self.seed, self.rank = spec, fmt, seed, rank
        self.item_places = item_places  # lists move within this many item places (with_items_moved); 0: they stay
        self.item_spread = item_spread  # ... each item to its own random place, in order
        self.length_buckets = length_buckets
        # A pool of problems a starting model got wrong or was unsure of (hf_arith.training.mining), drawn
        # with replacement for `mined_fraction` of the examples; the rest as without it.
        self.mined = mined if mined is not None and len(mined) else None
        self.mined_fraction = mined_fraction if self.mined is not None else 0.0
        self.hard_kind = hard_kind
        self.random_prefix, self.hard_fraction = random_prefix, hard_fraction
        self.hard_fraction_fade = tuple(hard_fraction_fade) if hard_fraction_fade else None
        self.context_problems = context_problems
        self.state = state or CurriculumState(spec.min_digits, spec.max_digits)
        self.chunk_size, self.test_fraction = chunk_size, test_fraction
        self.length = worst_case_length(spec, fmt) * (1 + context_problems) + random_prefix
        # Fixed-width formats never pad: without an attention mask the model skips building one.
        self.with_mask = has_padding(spec, fmt) or random_prefix > 0 or context_problems > 0

    def current_spec(self) -> ProblemSpec:
        return self._spec_for(self.state.min_digits, self.state.max_digits)

    def _spec_for(self, min_digits: int, max_digits: int) -> ProblemSpec:
        return ProblemSpec(task=self.spec.task, base=self.spec.base, min_digits=min_digits, max_digits=max_digits,
                           min_items=self.spec.min_items, max_items=self.spec.max_items, sample_by=self.spec.sample_by)

    def hard_fraction_at(self, step: int) -> float:
        """The share of hard problems at global step `step` (constant without a fade)."""
        if self.hard_fraction_fade is None:
            return self.hard_fraction
        start, end = self.hard_fraction_fade
        return self.hard_fraction * min(1.0, max(0.0, (end - step) / (end - start)))

    def _segments(self, chunk: int) -> list[tuple[int, int, int, float]]:
        """(count, min_digits, max_digits, hard share) runs covering chunk `chunk`, in order."""
        state = self.state
        if state.schedule is None or state.examples_per_step < 1:
            return [(self.chunk_size, state.min_digits, state.max_digits, self.hard_fraction)]
        first = chunk * self.chunk_size
        steps, counts = np.unique(np.arange(first, first + self.chunk_size) // state.examples_per_step,
                                  return_counts=True)
        segments: list[tuple[int, int, int, float]] = []
        for step, count in zip(steps.tolist(), counts.tolist()):
            key = (*state.schedule(step), self.hard_fraction_at(step))
            if segments and segments[-1][1:] == key:
                segments[-1] = (segments[-1][0] + count, *key)
            else:
                segments.append((count, *key))
        return segments

    def chunk(self, index: int, worker: int = 0):
        """input_ids, attention_mask, labels of chunk `index`: the same arrays every time it is asked for."""
        rng = np.random.default_rng([self.seed, self.rank, worker, index])
        parts = []
        group = 1 + self.context_problems
        for count, lo, hi, share in self._segments(index):
            mined = rng.binomial(count, self.mined_fraction) if self.mined_fraction else 0
            if mined:
                picked = self._placed(self.mined.select(rng.integers(0, len(self.mined), mined * group)), rng)
                parts.append(encode_examples(picked, self.fmt, self.length, rng if self.random_prefix else None,
                                             rng.integers(1, group + 1, mined) if self.context_problems else None))
                count -= mined
            hard = rng.binomial(count, share) if share else 0
            for n, kind in ((count - hard, "uniform"), (hard, self.hard_kind)):
                if n:
                    problems = self._placed(sample(self._spec_for(lo, hi), n * group, rng, split="train",
                                                   test_fraction=self.test_fraction, kind=kind), rng)
                    # Each example packs 1 to `group` problems (the earlier ones are its context).
                    sizes = rng.integers(1, group + 1, n) if self.context_problems else None
                    # Operands shorter than the spec's widest keep the fixed sequence length by padding.
                    parts.append(encode_examples(problems, self.fmt, self.length, rng if self.random_prefix else None,
                                                 sizes))
        arrays = tuple(np.concatenate(columns) for columns in zip(*parts))
        if self.hard_fraction or self.mined_fraction:  # hard and mined problems spread over the chunk's batches
            order = rng.permutation(len(arrays[0]))
            arrays = tuple(a[order] for a in arrays)
        return arrays

    def _placed(self, problems: Problems, rng: np.random.Generator) -> Problems:
        return with_items_moved(problems, self.item_places, rng, self.item_spread) if self.item_places else problems

    def start_position(self) -> int:
        """The example iteration starts at: read when it starts, after the Trainer's on_train_begin has set
        a resumed step."""
        return self.state.start_step * self.state.examples_per_step if self.state.schedule else 0

    def _arrays(self, position: int | None = None):
        """The stream's chunks as (input_ids, attention_mask, labels), from example `position` (default:
        where iteration starts) on."""
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        position = self.start_position() if position is None else position
        index, skip = divmod(position, self.chunk_size)
        while True:
            yield tuple(a[skip:] for a in self.chunk(index, worker))
            index, skip = index + 1, 0

    def _example(self, input_ids, attention_mask, labels) -> dict:
        example = {"input_ids": input_ids, "labels": labels}
        if self.with_mask:
            example["attention_mask"] = attention_mask
        return example

    def __iter__(self):
        for arrays in self._arrays():
            for row in zip(*arrays):
                yield self._example(*row)

    def batches(self, batch_size: int) -> StreamBatches:
        """The same examples in the same order, `batch_size` at a time and already collated."""
        return StreamBatches(self, batch_size)


class StreamBatches(torch.utils.data.IterableDataset):
    """A ProblemStream's examples as the batches a DataLoader of the stream with `stack_examples` gives,
    sliced from its chunks whole: handing out a tiny model's examples one by one costs about a tenth
    of its training step. Iterate it with `DataLoader(..., batch_size=None)`.

    With the stream's `length_buckets` = k >= 1, each window of k batches' worth of consecutive examples
    is sorted by length, cut into k batches, each cut to its longest row, and handed out in a seeded
    order: item lists and products vary several-fold in length, and every row otherwise pays for the
    longest problem the spec allows. Windows start at multiples of k batches, so a resumed run sees
    the batches an uninterrupted one would have seen."""

    def __init__(self, stream: ProblemStream, batch_size: int):
        self.stream, self.batch_size = stream, batch_size

    def __iter__(self):
        stream, size = self.stream, self.batch_size
        if stream.length_buckets:
            yield from self._bucketed(stream.length_buckets)
            return
        for arrays in _runs_of(stream._arrays(), size):
            yield stream._example(*(torch.from_numpy(a) for a in arrays))

    def _bucketed(self, buckets: int):
        stream, size = self.stream, self.batch_size
        window = size * buckets
        first, skip = divmod(stream.start_position(), window)
        for w, arrays in enumerate(_runs_of(stream._arrays(first * window), window), start=first):
            lengths = arrays[1].sum(axis=1)  # attended tokens: the problem (and any filler before it)
            by_length = np.argsort(lengths, kind="stable")
            order = np.random.default_rng([stream.seed, stream.rank, w, 1]).permutation(buckets)
            for b in order[-(-skip // size):] if w == first else order:
                rows = by_length[b * size:(b + 1) * size]
                width = int(lengths[rows].max())
                yield stream._example(*(torch.from_numpy(np.ascontiguousarray(a[rows, :width])) for a in arrays))


def _runs_of(chunks, size: int):
    """Consecutive runs of exactly `size` rows from a stream of chunk arrays (a run may span chunks)."""
    rest = None
    for arrays in chunks:
        if rest is not None:
            arrays = tuple(np.concatenate(pair) for pair in zip(rest, arrays))
        whole = len(arrays[0]) - len(arrays[0]) % size
        for start in range(0, whole, size):
            yield tuple(a[start:start + size] for a in arrays)
        rest = tuple(a[whole:] for a in arrays)
