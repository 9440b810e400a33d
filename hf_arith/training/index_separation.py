"""A training penalty that keeps far-apart abacus indices apart in attention (`optim.abacus_separation`).

Why: with operands of at most n digits, two abacus indices n or more apart never meet in one
training problem, whatever the random offset (one offset moves the whole problem). Nothing then
stops an attention head that looks digits up by index from scoring such a pair alike, and in
the bundled abacus-gpt2-add some did: index 1 against 14, 2 against 15, 3 against 18, 4 against
20. A long operand puts those digits side by side and the lookup fetches the wrong one; those
were exactly the answer digits that failed beyond the training length
(bench/results/abacus-length.md).

What: the scores are taken from the weights alone: every abacus row goes through each block's
first norm and its query and key projections, giving a [heads, index, index] table of what
index i's query thinks of index j's key. A head whose scores single out one key index among the
near ones (|i - j| < gap, seen in training) for the average query is an index-relational head
(digit lookup: j = i; the carry's lookup: j = i - 1). For those heads every far key
(|i - j| >= gap) must score at least `margin` below the key the query prefers; the penalty is the
mean squared shortfall. It costs a few small matrix products per step and no data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def has_abacus_table(model) -> bool:
    body = getattr(model, "transformer", None)
    return isinstance(getattr(body, "abacus", None), torch.nn.Embedding) and hasattr(body, "h")


def index_scores(block, table: torch.Tensor) -> torch.Tensor:
    """[heads, n, n] attention logits of abacus rows `table` [n, hidden] against each other in `block`."""
    attn = block.attn
    q, k, _ = attn.c_attn(block.ln_1(table)).view(len(table), 3, attn.num_heads, attn.head_dim).unbind(1)
    return torch.einsum("ihd,jhd->hij", q, k) * attn.scaling


def abacus_separation_penalty(model, gap: int, margin: float = 4.0) -> torch.Tensor:
    """Mean squared shortfall of far keys below each relational head's preferred near key (0 when
    every far index is at least `margin` logits below it)."""
    body = model.transformer
    table = body.abacus.weight[1:]  # row 0 is "not a digit"
    index = torch.arange(len(table), device=table.device)
    distance = (index[:, None] - index[None, :]).abs()
    near, far = distance < gap, distance >= gap
    if not far.any():
        return table.new_zeros(())
    total = table.new_zeros(())
    for block in body.h:
        scores = index_scores(block, table)
        near_scores = scores.masked_fill(~near, float("-inf"))
        top2 = near_scores.topk(2, dim=-1).values  # preferred near key and the runner-up
        preferred = top2[..., 0]
        relational = ((top2[..., 0] - top2[..., 1]).mean(-1) > 0).detach()  # [heads]
        shortfall = F.relu(scores - preferred[..., None] + margin).pow(2) * far
        total = total + (shortfall.sum((1, 2)) / far.sum() * relational).sum()
    return total


__all__ = ["abacus_separation_penalty", "has_abacus_table", "index_scores"]
