"""`hf-arith train`: train a preset or a YAML recipe."""

from __future__ import annotations

import sys
from pathlib import Path

from ..data.errors import CLIError
from .common import DEFAULT_PRESET, PROG, describe_format


def add_parsers(sub, parents) -> None:
    from ..training.recipe import list_presets

    p = sub.add_parser("train", parents=[parents["common"]],
                       help="train a model from a recipe (default: the minimal-add10 preset)",
                       description=f"Train from a preset ({', '.join(list_presets())}) or a YAML recipe file.")
    p.add_argument("recipe", nargs="?", default=DEFAULT_PRESET, metavar="RECIPE",
                   help=f"preset name or YAML file (default: {DEFAULT_PRESET})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a recipe value (YAML syntax), e.g. --set optim.steps=2000; repeatable")
    p.add_argument("--output-dir", metavar="DIR", help="where checkpoints go (default: the recipe's output_dir)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint-* in the output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="train into a non-empty output folder, deleting its checkpoint-* folders and final/ first")
    p.add_argument("--list", action="store_true", help="list the presets: what each trains, its training time, stages")
    p.set_defaults(func=cmd_train)


def print_presets() -> int:
    """The catalogue of presets: each one's line, task, family, training time and stages."""
    from ..data.formatting import get_task
    from ..training.recipe import preset_catalogue

    for row in preset_catalogue():
        stages = f"; stages: {' -> '.join(row['stages'])}" if row["stages"] else ""
        print(f"{row['name']}  ({get_task(row['task']).title}, {row['family']} family)\n"
              f"  {row['about']}\n  training: {row['train_time']}{stages}")
    return 0


def cmd_train(args) -> int:
    if args.list:
        return print_presets()
    import torch

    from ..training.recipe import load_recipe
    from ..training.run import is_main_process, prepare_run, run_training, world_size
    from .evaluate import print_report
    from .verify import print_verify

    overrides = list(args.set or [])
    if args.threads is not None:
        overrides.append(f"optim.threads={args.threads}")
    recipe = load_recipe(args.recipe or DEFAULT_PRESET, overrides)
    output_dir = args.output_dir or recipe.output_dir
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--output-dir {output_dir}: exists and is not a folder")
    # Every recipe and launch mistake (and a --resume with nothing to resume) is reported now, not after training.
    run = prepare_run(recipe, output_dir, resume=args.resume, overwrite=args.overwrite)
    if run.finished is not None:  # --resume of a run that has ended: one line, exit 0, nothing changed
        run_training(run)
        return 0
    fmt = run.fmt
    main_process = is_main_process()  # under torchrun / accelerate launch, rank 0 does the talking
    if run.checkpoint is not None:
        if main_process:
            print(f"Resuming from {run.checkpoint}")
    else:
        try:
            out.mkdir(parents=True, exist_ok=True)  # a bad output path fails now, not after training
        except OSError as err:
            raise CLIError(f"--output-dir {output_dir}: cannot create it ({err.strerror or err})") from None
    d, o = recipe.data, recipe.optim
    world = world_size()
    where = "GPU" if torch.cuda.is_available() else "CPU"
    if main_process:
        print(f"Training {recipe.name}: {recipe.family} family, {describe_format(fmt)}, {d.min_digits}-{d.max_digits} "
              f"digits, {o.steps} steps of {o.batch_size} on "
              f"{f'{world} processes ({where})' if world > 1 else where}; output in {output_dir}", flush=True)
    try:
        summary = run_training(run)
    except KeyboardInterrupt:
        print(f"{PROG}: training interrupted; --resume continues from the last checkpoint-* in {output_dir}",
              file=sys.stderr)
        raise
    if not main_process:
        return 0
    print()
    loss = summary.get("train_loss")
    seconds = summary.get("train_seconds")
    # The mean loss covers the whole run, or (resumed from a checkpoint without a loss record) the steps
    # this run made; then it says which.
    covered = summary.get("train_loss_steps")
    partial = f" over steps {covered[0]}-{covered[1]} only" if covered and covered[0] > 1 else ""
    screen = summary.get("screen")
    if screen:
        tried = screen["candidates"]
        print(f"Screened {len(tried)} init{'s' if len(tried) > 1 else ''} for {screen['screen_steps']} steps each in "
              f"{screen['screen_seconds']:.1f} s; continued seed {screen['chosen_seed']} (losses: "
              + ", ".join(f"{c['seed']}: {c['loss']:.4f}" if c["loss"] is not None else f"{c['seed']}: none"
                          for c in tried) + ")")
    print(f"Trained {summary.get('steps')} steps"
          + (f" in {float(seconds):.1f} s" if seconds is not None else "")
          + (f", mean training loss {loss:.4f}{partial}" if isinstance(loss, (int, float)) else "")
          + f"; {summary['unique_params']} unique parameters")
    if "heldout" in summary:
        print()
        print_report(summary["heldout"])
    verify = summary.get("verify")
    if verify:
        print()
        print_verify(verify, name=recipe.name)
    print()
    print(f"Checkpoint saved to {summary['output']}")
    return 0
