"""Can light draft heads (no attention) write the tokens after next? A probe on a frozen trunk.

    python bench/draft_heads.py                       # abacus-gpt2-add-window-10-k2, heads for tokens 2-4 ahead
    python bench/draft_heads.py --width 64 --steps 1000

Self-speculative decoding gains wall time only when a pass that drafts costs little more than a
one-token pass (bench/results/speculative_speed.md): the bundled k2's head is a whole block with
attention. This probe asks whether heads as light as a residual MLP on the trunk's last state (before
its final norm; then the model's own norm and output head) could draft instead. The trunk stays
frozen: the features of teacher-forced held-out problems (`--train` problems of 1-10 digits) are
computed once, and head j is trained (AdamW, one-cycle schedule, batches of 2,048 positions) to
predict the token j + 1 places after the next one at every answer position. Reported per head: the
share of answer positions of fresh held-out problems (1-10 digits, 30 digits, 100 digits) where
its argmax is the right token, i.e. how often a draft would be accepted. Results go to
bench/results/draft_heads.json with the machine and the command.
"""

from __future__ import annotations

import time

import torch
from common import script_parser
from machine import RESULTS, load_average, write_results
from torch import nn

from hf_arith.data.formatting import render
from hf_arith.data.problems import ProblemSpec, held_out_problems
from hf_arith.runtime.loading import load_checkpoint

TEST_SETS = ((1, 10, 2000), (30, 30, 100), (100, 100, 40))  # (shortest, longest operand, problems)


def trunk_features(model, tok, heads: int, lo: int, hi: int, n: int, seed: int):
    """(states [m, hidden], targets [m], head [m]): the trunk's last state at each answer position t and
    the token head j (1..heads) should write there, t + 1 + j, for every j that stays inside the sequence."""
    grab = {}
    hook = model.transformer.ln_f.register_forward_hook(lambda module, args, out: grab.update(h=args[0]))
    problems = held_out_problems(ProblemSpec(task="add", base=10, min_digits=lo, max_digits=hi), n, seed=seed)
    ids, lengths, prompt_lengths = render(problems, tok.arith_format, with_answer=True)
    ids, lengths, prompt_lengths = (torch.from_numpy(x).long() for x in (ids, lengths, prompt_lengths))
    columns = torch.arange(ids.shape[1])[None]
    ids = torch.where(columns < lengths[:, None], ids, tok.pad_token_id)
    states, targets, which = [], [], []
    try:
        with torch.inference_mode():
            for start in range(0, len(ids), 256):
                rows = slice(start, start + 256)
                model(input_ids=ids[rows], num_future_tokens=1)
                for j in range(1, heads + 1):
                    ok = (columns >= prompt_lengths[rows, None] - 1) & (columns + 1 + j < lengths[rows, None])
                    r, c = ok.nonzero(as_tuple=True)
                    states.append(grab["h"][r, c])
                    targets.append(ids[rows][r, c + 1 + j])
                    which.append(torch.full((len(r),), j))
    finally:
        hook.remove()
    return torch.cat(states), torch.cat(targets), torch.cat(which)


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--model", default="abacus-gpt2-add-window-10-k2", help="bundled name or checkpoint folder")
    parser.add_argument("--heads", type=int, default=3, help="draft heads: tokens 2 .. heads + 1 ahead")
    parser.add_argument("--width", type=int, default=256, help="each head's MLP width")
    parser.add_argument("--train", type=int, default=20000, help="held-out problems whose features train the heads")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "draft_heads.json"))
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    load_before = load_average()
    model, tok = load_checkpoint(args.model)
    model.eval().requires_grad_(False)
    start = time.perf_counter()
    train = trunk_features(model, tok, args.heads, 1, 10, args.train, seed=11)
    tests = {f"{lo}-{hi} digits": trunk_features(model, tok, args.heads, lo, hi, n, seed=99) for lo, hi, n in TEST_SETS}
    d = model.config.hidden_size
    heads = nn.ModuleList([nn.Sequential(nn.LayerNorm(d), nn.Linear(d, args.width), nn.GELU(), nn.Linear(args.width, d))
                           for _ in range(args.heads)])
    for head in heads:  # each starts as the identity: the next-token head's own guess
        nn.init.zeros_(head[-1].weight)
        nn.init.zeros_(head[-1].bias)
    norm, output = model.transformer.ln_f, model.lm_head

    def logits(states, which):
        out = torch.empty(len(states), output.out_features)
        for j, head in enumerate(heads, start=1):
            rows = which == j
            out[rows] = output(norm(states[rows] + head(states[rows])))
        return out

    optimizer = torch.optim.AdamW(heads.parameters(), lr=2e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 2e-3, total_steps=args.steps, pct_start=0.05)
    states, targets, which = train
    for _ in range(args.steps):
        pick = torch.randint(0, len(states), (2048,))
        loss = nn.functional.cross_entropy(logits(states[pick], which[pick]), targets[pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    with torch.no_grad():
        accuracy = {name: {f"token {j + 1} ahead": round(float((logits(s, w)[w == j].argmax(-1) == t[w == j]).float().mean()), 4)
                           for j in range(1, args.heads + 1)} for name, (s, t, w) in tests.items()}
    for name, row in accuracy.items():
        print(name, row)
    record = {"model": args.model, "heads": args.heads, "width": args.width, "train_problems": args.train,
              "train_positions": len(states), "steps": args.steps, "final_loss": round(loss.item(), 4),
              "seconds": round(time.perf_counter() - start, 1),
              "test_problems": {f"{lo}-{hi} digits": n for lo, hi, n in TEST_SETS}, "draft_accuracy": accuracy}
    what = ("light draft heads (a residual MLP each, no attention) trained on the frozen trunk's last states; "
            "draft_accuracy: the share of answer positions of held-out problems where head j's argmax is the token "
            "j + 1 places after the next one")
    return write_results(args.out, record, what=what, load_before=load_before)


if __name__ == "__main__":
    main()
