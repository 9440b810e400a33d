"""Plant known bugs in a copy of the repository, one at a time, and check that the tests catch each.

    python scripts/mutation_check.py                 # every mutation; exit status 1 if any survives
    python scripts/mutation_check.py --only heldout-split solve-drops-model-kwargs
    python scripts/mutation_check.py --list          # the mutations and the tests that must catch them
    python scripts/mutation_check.py --save          # also bench/results/mutation_check.{json,md}

Each mutation is a text substitution in one file, whose pattern must occur there exactly once.
Before anything runs, every mutation's pattern is checked against the working tree
(`stale_patterns`, which tests/test_mutation_patterns.py also runs): any that no longer match
exactly once are reported by name and the check fails at once, so a mutation can never silently
stop applying after the code changes. Then the working tree (without .git, virtual environments,
caches and runs) is copied to a temporary folder once. With the bug planted, `python -m pytest -x -q` runs the mutation's test files in the copy, with PYTHONPATH
set to the copy so that its `hf_arith` is imported rather than the editable install (checked
before the first run); then the file is restored. Exit status 1 of pytest (a test failed) means
caught; 0 means the bug survived; anything else (a collection error, a crash) is reported as an
error; either way the run goes on to the next mutation. Before the mutations, the same test files
run on the unmodified copy and must pass (`--no-baseline` skips that). `--save` records only a
complete run (every mutation, after the baseline): it is refused with `--only` or `--no-baseline`,
and nothing is written when the run stops early.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the copy leaves out: version control, environments, caches and training runs.
IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".ruff_cache",
                                "*.egg-info", "build", "dist", "runs", "outputs")


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = [
    Mutation("heldout-split", "held-out evaluation draws from the training split",
             "hf_arith/data/problems.py", 'np.random.default_rng(seed), split="test", test_fraction=test_fraction)',
             'np.random.default_rng(seed), split="train", test_fraction=test_fraction)', ("tests/test_heldout.py",)),
    Mutation("solve-drops-model-kwargs", "solve never passes model_kwargs (num_recurrences) to the model",
             "hf_arith/runtime/solving.py", '"tokens_per_step": tokens_per_step, "model_kwargs": model_kwargs,',
             '"tokens_per_step": tokens_per_step, "model_kwargs": None,', ("tests/test_recurrences.py",)),
    Mutation("loops-curve-drops-kwargs", "eval --loops scores every loop count at the default count",
             "hf_arith/evaluation/held_out.py", 'model_kwargs={"num_recurrences": n},', "model_kwargs=None,",
             ("tests/test_recurrences.py",)),
    Mutation("grid-teacher-forcing-drops-kwargs", "the grid's teacher-forced pass ignores the loop count",
             "hf_arith/evaluation/grid.py", "problems, batch_size, model_kwargs, on_batch=bar.update)",
             "problems, batch_size, None, on_batch=bar.update)", ("tests/test_recurrences.py",)),
    Mutation("space-drops-slider", "the Space's Solve handler ignores the recurrences slider",
             "spaces/arith-playground/app.py", "return entry.pipe(problem, return_confidence=True, **kwargs)",
             "return entry.pipe(problem, return_confidence=True)", ("tests/test_space.py",)),
    Mutation("abacus-ids-off-by-one", "abacus position ids count digits from 2 instead of 1",
             "hf_arith/models/abacus_positions.py", "torch.where(is_digit, index - last_break, torch.zeros_like(index))",
             "torch.where(is_digit, index - last_break + 1, torch.zeros_like(index))", ("tests/test_abacus_model.py",)),
    Mutation("loss-mask-labels-prompt", "training labels cover the prompt as well as the answer",
             "hf_arith/data/streaming.py",
             "labels = np.where(np.take_along_axis(answer, source.clip(0, width - 1), axis=1) & inside, input_ids, "
             "LABEL_IGNORE)", "labels = np.where(inside, input_ids, LABEL_IGNORE)", ("tests/test_streaming.py",)),
    Mutation("training-stream-any-split", "the training stream draws test problems too",
             "hf_arith/data/streaming.py", 'n * group, rng, split="train",', "n * group, rng, split=None,",
             ("tests/test_streaming.py",)),
    Mutation("cache-view-drops-newest-key", "the decoder's KV cache hands attention every key but the newest",
             "hf_arith/runtime/decoding.py", "self.keys, self.values = self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]",
             "self.keys, self.values = self.key_buffer[:, :, :end - 1], self.value_buffer[:, :, :end - 1]",
             ("tests/test_decoding.py",)),
    Mutation("looped-cache-slots-shared", "every recurrence of a looped model reuses the first pass's cache layers",
             "hf_arith/models/modeling_looped.py", "self.cache.update(key_states, value_states, self.offset + layer_idx,",
             "self.cache.update(key_states, value_states, layer_idx,", ("tests/test_looped_model.py",)),
    Mutation("decoder-forgets-finished-rows", "a row that wrote <eos> starts writing again a step later",
             "hf_arith/runtime/decoding.py", "finished |= column == eos_token_id", "finished = column == eos_token_id",
             ("tests/test_decoding.py",)),
    Mutation("resume-oldest-checkpoint", "--resume picks the oldest complete checkpoint",
             "hf_arith/training/run.py", "is not None), reverse=True)", "is not None))", ("tests/test_resume.py",)),
    Mutation("exact-match-over-well-formed", "exact match divides by the well-formed answers only",
             "hf_arith/evaluation/metric/scores.py", '"exact_match": sum(p == r for p, r in zip(predictions, references)) / n,',
             '"exact_match": sum(p == r for p, r in zip(predictions, references)) / '
             "max(1, sum(p is not None for p in predictions)),", ("tests/test_metrics.py",)),
    Mutation("per-digit-aligned-left", "per-digit accuracy aligns answers at the leading digit",
             "hf_arith/evaluation/metric/scores.py", 'a, b = prediction.rjust(width, " "), reference.rjust(width, " ")',
             'a, b = prediction.ljust(width, " "), reference.ljust(width, " ")', ("tests/test_metrics.py",)),
    Mutation("progressive-state-not-detached", "the progressive loss backpropagates into its first n passes",
             "hf_arith/models/modeling_looped.py", "start = None if start is None else start.detach()",
             "start = start", ("tests/test_looped_model.py",)),
    Mutation("progressive-weights-swapped", "the progressive and full-depth losses swap their weights",
             "hf_arith/models/modeling_looped.py", "alpha * full_loss + (1 - alpha) * prog_loss",
             "(1 - alpha) * full_loss + alpha * prog_loss", ("tests/test_looped_model.py",)),
    Mutation("kept-queries-unmasked", "with logits_to_keep=2 and no mask, the top block computes two queries",
             "hf_arith/models/modeling_common.py", "(mask is None and keep_last > 1)", "(mask is None and keep_last > 2)",
             ("tests/test_abacus_model.py", "tests/test_looped_model.py", "tests/test_minimal_model.py")),
    Mutation("grid-sampled-cells-from-train", "the grid's large (sampled) cells draw training problems",
             "hf_arith/evaluation/grid.py", "batch = batch.select(split_of(batch, test_fraction))",
             "batch = batch.select(~split_of(batch, test_fraction))", ("tests/test_heldout.py", "tests/test_grid.py")),
    Mutation("grid-enumerated-cells-from-train", "the grid's small (enumerated) cells draw training problems",
             "hf_arith/evaluation/grid.py", "test = np.flatnonzero(split_of(pool, test_fraction)) if heldout",
             "test = np.flatnonzero(~split_of(pool, test_fraction)) if heldout",
             ("tests/test_heldout.py", "tests/test_grid.py")),
    Mutation("tokenizer-operand-digit-order", "the tokenizer writes operands in the other digit order",
             "hf_arith/data/tasks/base.py",
             "lengths[:, 0], fmt.operand_width, fmt.reverse_operands),\n                const_segment(vocab[self.operator], ones),\n"
             "                digit_segment(problems.operands[:, 1], problems.lengths[:, 1], fmt.operand_width, fmt.reverse_operands)]",
             "lengths[:, 0], fmt.operand_width, not fmt.reverse_operands),\n                const_segment(vocab[self.operator], ones),\n"
             "                digit_segment(problems.operands[:, 1], problems.lengths[:, 1], fmt.operand_width, not fmt.reverse_operands)]", ("tests/test_tokenizer.py", "tests/test_formatting.py")),
    Mutation("confidence-highest-token", "an answer's confidence is its most certain token, not its least",
             "hf_arith/runtime/solving.py", "masked_fill(beyond, 1.0).min(1).values", "masked_fill(beyond, 1.0).max(1).values",
             ("tests/test_confidence.py",)),
    Mutation("card-metadata-per-digit", "the model card's metadata reports per-digit accuracy as exact match",
             "hf_arith/publishing/model_card.py", 'metric_value=float(report["exact_match"])',
             'metric_value=float(report["per_digit_accuracy"])', ("tests/test_reported_figures.py",)),
    Mutation("card-text-per-digit", "the model card's text reports per-digit accuracy as exact match",
             "hub_cards/model_card.md", "**Held-out exact match: {{ \"%.2f\" | format(100 * report.exact_match) }} %**",
             "**Held-out exact match: {{ \"%.2f\" | format(100 * report.per_digit_accuracy) }} %**",
             ("tests/test_reported_figures.py",)),
    Mutation("grid-cells-repeat-first-problem", "every grid cell asks its first problem N times",
             "hf_arith/evaluation/grid.py", "        parts.append(problems)\n",
             "        parts.append(problems.select(np.zeros(len(problems), dtype=np.int64)))\n",
             ("tests/test_reported_figures.py", "tests/test_lengths.py")),
    Mutation("chunks-ignore-sequence-length", "a batch of long problems runs whole, whatever its memory",
             "hf_arith/runtime/decoding.py", "    return max(1, BATCH_MEMORY_BUDGET // row_bytes(model, tokens))\n",
             "    return 1 << 30\n", ("tests/test_lengths.py",)),
    Mutation("answer-out-of-budget-read", "an answer cut off by its token budget reads as the digits it wrote",
             "hf_arith/data/formatting.py", "    if fmt.end_token and not ended:\n        return None\n",
             "    if fmt.end_token and not ended and not chars:\n        return None\n", ("tests/test_lengths.py",)),
    Mutation("multi-token-step-writes-one", "a step of several tokens writes its first token and advances past all",
             "hf_arith/runtime/decoding.py",
             "        if rows is None:\n            result[:, span] = step\n        else:\n            result[rows, span] = step\n",
             "        if rows is None:\n            result[:, span.start] = step[:, 0]\n"
             "        else:\n            result[rows, span.start] = step[:, 0]\n", ("tests/test_decoding.py",)),
    Mutation("views-vote-keeps-first", "the views' vote returns the answer of the problem as given, whatever the others say",
             "hf_arith/runtime/answer_views.py", "best = max(votes, key=lambda a: (len(votes[a]), surest[a], -votes[a][0]))",
             "best = next(iter(votes))", ("tests/test_answer_views.py",)),
    Mutation("views-tie-ignores-confidence", "two views that disagree give the earlier view's answer, however unsure",
             "hf_arith/runtime/answer_views.py", "best = max(votes, key=lambda a: (len(votes[a]), surest[a], -votes[a][0]))",
             "best = max(votes, key=lambda a: (len(votes[a]), -votes[a][0]))", ("tests/test_answer_views.py",)),
    Mutation("views-confidence-unscaled", "an answer some views disagree with keeps its full confidence",
             "hf_arith/runtime/answer_views.py", "confidence = len(agreeing) / count * min(confidences[i] for i in agreeing)",
             "confidence = min(confidences[i] for i in agreeing)", ("tests/test_answer_views.py",)),
    Mutation("routing-ignores-list-sizes", "a list with no model named goes to the sort default however many items it has",
             "hf_arith/runtime/loading.py", "    items = len(operands) if get_task(task).item_list else None",
             "    items = None", ("tests/test_bundled.py",)),
    Mutation("other-model-ignores-list-sizes", "the bundled model named for a long list need not take that many items",
             "hf_arith/bundled.py", "        if items is not None and (reach[\"items\"] is None",
             "        if False and (reach[\"items\"] is None", ("tests/test_bundled.py",)),
    Mutation("row-window-reads-b-by-index", "under abacus_row_window an answer token finds b's digits by index, not row",
             "hf_arith/models/abacus_positions.py", "    seen = torch.where(b_key, (rows_up == 0) | (rows_up == 1),",
             "    seen = torch.where(b_key, (up >= -1) & (up <= 0),", ("tests/test_abacus_model.py",)),
    Mutation("window-layers-ignored", "with abacus_window_layers every block still reads through the window",
             "hf_arith/models/modeling_abacus_gpt2.py", "        windowed = self.config.abacus_window_layers or len(self.h)",
             "        windowed = len(self.h)", ("tests/test_abacus_model.py",)),
    Mutation("views-vote-on-capped-confidences", "beyond the trained range the views vote by capped confidences, so "
             "the problem as given wins every split", "hf_arith/runtime/solving.py",
             "                                       decode, confidence=True, calibrate=False, progress=progress)",
             "                                       decode, confidence=True, calibrate=not checked, progress=progress)",
             ("tests/test_answer_views.py",)),
    Mutation("hard-limit-skips-lopsided", "solve takes a lopsided problem (15 x 1 digits) past the hard limit because "
             "it fits the context", "hf_arith/runtime/limits.py", "        if (longest > self.max_digits).any():",
             "        if False:", ("tests/test_limits.py",)),
    Mutation("pipeline-skips-hard-limit", "the pipeline takes an operand past config.max_operand_digits where it fits",
             "hf_arith/runtime/pipeline_arithmetic.py", "                if digits > hard_limit:",
             "                if False:", ("tests/test_pipeline.py",)),
    Mutation("mining-ignores-its-corner", "a stage mines its whole range, not the corner data.mine_max_digits names",
             "hf_arith/training/run.py", "    return dataclasses.replace(spec, max_digits=d.mine_max_digits or spec.max_digits,",
             "    return dataclasses.replace(spec, max_digits=spec.max_digits,", ("tests/test_mining.py",)),
    Mutation("batches-drop-chunk-tail", "a batch that spans two chunks loses the first chunk's last examples",
             "hf_arith/data/streaming.py", "        rest = tuple(a[whole:] for a in arrays)",
             "        rest = None", ("tests/test_streaming.py", "tests/test_training.py")),
    Mutation("buckets-keep-padding", "a length-bucketed batch keeps the padding to the longest problem the spec allows",
             "hf_arith/data/streaming.py", "                width = int(lengths[rows].max())",
             "                width = arrays[0].shape[1]", ("tests/test_streaming.py",)),
    Mutation("buckets-resume-from-window-start", "a resumed bucketed run repeats the batches of its window already trained",
             "hf_arith/data/streaming.py", "            for b in order[-(-skip // size):] if w == first else order:",
             "            for b in order:", ("tests/test_streaming.py",)),
    Mutation("abandon-reads-last-score", "a screened init is given up on its last held-out score, not its best",
             "hf_arith/training/seed_screen.py", '        best = max(h["exact_match"] for h in history)',
             '        best = history[-1]["exact_match"]', ("tests/test_best_held_out.py",)),
]


def copy_tree(target: Path) -> Path:
    """The working tree as it is now (tracked or not), without what IGNORE names."""
    repo = target / "repo"
    shutil.copytree(ROOT, repo, ignore=IGNORE, symlinks=True)
    return repo


def environment(repo: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def check_imports_the_copy(repo: Path, env: dict) -> None:
    """The editable install points at the original tree; the copy's package must win over it."""
    done = subprocess.run([sys.executable, "-c", "import hf_arith; print(hf_arith.__file__)"], cwd=repo, env=env,
                          capture_output=True, text=True)
    where = Path(done.stdout.strip() or "?").resolve()
    if done.returncode or repo.resolve() not in where.parents:
        raise SystemExit(f"mutation_check: the copy imports hf_arith from {where}, not from {repo}; {done.stderr[-300:]}")


def pytest(repo: Path, env: dict, tests: tuple[str, ...], stop_first: bool = True) -> tuple[int, float, str, str]:
    """(pytest's exit status, seconds, its last line, the first failing test or "")."""
    # -n 0: in one process, so -x stops at the first failure and its FAILED line names it.
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *(["-x"] if stop_first else []), *tests]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    failed = next((line.split()[1] for line in lines if line.startswith("FAILED ")), "")
    return done.returncode, time.perf_counter() - start, lines[-1] if lines else done.stderr[-200:], failed


def stale_patterns(root: Path = ROOT, mutations: list[Mutation] | None = None) -> list[str]:
    """One line per mutation whose pattern does not occur exactly once in its file under `root`
    (or whose file is missing), naming the mutation; empty when every mutation can be planted."""
    problems = []
    for m in MUTATIONS if mutations is None else mutations:
        path = root / m.file
        if not path.is_file():
            problems.append(f"{m.name}: {m.file} does not exist")
            continue
        found = path.read_text().count(m.old)
        if found != 1:
            problems.append(f"{m.name}: the pattern occurs {found} times in {m.file} (must be exactly once): {m.old!r}")
    return problems


def plant(repo: Path, mutation: Mutation) -> str:
    """Apply the mutation in the copy (its pattern was checked by `stale_patterns`); returns the
    file's original text (to restore it)."""
    path = repo / mutation.file
    text = path.read_text()
    path.write_text(text.replace(mutation.old, mutation.new, 1))
    return text


def verdict(status: int) -> str:
    return {1: "caught", 0: "NOT CAUGHT"}.get(status, f"error (pytest status {status})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these mutations only")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip the run of the tests on the unmodified copy")
    parser.add_argument("--save", action="store_true",
                        help="write bench/results/mutation_check.json and .md (a complete run only)")
    args = parser.parse_args(argv)
    if args.save and (args.only or args.no_baseline):
        parser.error("--save records a complete run: every mutation, after the baseline (drop --only and --no-baseline)")
    chosen = MUTATIONS
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in MUTATIONS})
        if unknown:
            parser.error(f"unknown mutation(s): {', '.join(unknown)}")
        chosen = [m for m in MUTATIONS if m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.what} ({m.file}) -> {' '.join(m.tests)}")
        return 0
    stale = stale_patterns()
    if stale:  # before anything runs: a mutation that cannot be planted is a failure of the check
        raise SystemExit(f"mutation_check: {len(stale)} of {len(MUTATIONS)} mutations no longer match the code; "
                         "update their patterns:\n  " + "\n  ".join(stale))

    sys.path.insert(0, str(ROOT / "bench"))
    from machine import load_average, markdown_table, write_results  # bench/machine.py: how results are recorded

    load_before, start = load_average(), time.perf_counter()
    rows, results = [], []
    with tempfile.TemporaryDirectory(prefix="hf_arith_mutations_") as tmp:
        repo = copy_tree(Path(tmp))
        env = environment(repo)
        check_imports_the_copy(repo, env)
        if not args.no_baseline:
            tests = tuple(sorted({t for m in chosen for t in m.tests}))
            status, seconds, tail, _ = pytest(repo, env, tests, stop_first=False)
            print(f"baseline (no mutation): pytest status {status} in {seconds:.0f} s: {tail}", flush=True)
            if status != 0:
                raise SystemExit("mutation_check: the tests fail without any mutation; fix them first")
        for m in chosen:
            original = plant(repo, m)
            try:
                status, seconds, tail, failed = pytest(repo, env, m.tests)
            finally:
                (repo / m.file).write_text(original)
            result = verdict(status)
            print(f"{m.name}: {result} in {seconds:.0f} s ({tail}){f' by {failed}' if failed else ''}", flush=True)
            results.append({"name": m.name, "what": m.what, "file": m.file, "tests": list(m.tests),
                            "result": result, "caught_by": failed or None, "pytest_status": status,
                            "seconds": round(seconds, 1)})
            rows.append([f"`{m.name}`", m.what, f"`{m.file}`", f"`{failed}`" if failed else "-", result])
    caught = sum(r["result"] == "caught" for r in results)
    print(f"{caught} of {len(results)} mutations caught")
    if args.save:
        table = markdown_table(["mutation", "planted bug", "file", "first failing test", "result"], "lllll", rows)
        write_results(ROOT / "bench" / "results" / "mutation_check.json",
                      {"caught": caught, "total": len(results), "seconds": round(time.perf_counter() - start),
                       "mutations": results},
                      what=f"Planted bugs caught by the test suite: {caught} of {len(results)} "
                           f"(scripts/mutation_check.py; pytest -x on each mutation's test files)",
                      load_before=load_before, title="Mutation check", table=table)
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
