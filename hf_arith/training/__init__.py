"""Training: a recipe in, a trained checkpoint and its held-out accuracy out.

Holds recipes and presets (`recipe`), the run itself as named steps (`run`), the output folder's
lock (`run_lock`), warm starts and stage chains (`warm_start`), seed screening (`seed_screen`),
hard-example mining (`mining`), and one module per family of Trainer callbacks: logging and
curves (`callbacks`), weight-decay schedules (`adaptive_decay`), gradient filtering
(`grokfast`), learning-rate drops on held-out accuracy (`held_out_lr`), keeping the best
held-out checkpoint (`best_held_out`) and the abacus index penalty (`index_separation`).

May import: `hf_arith.data`, `hf_arith.models`, `hf_arith.runtime`, `hf_arith.evaluation` (held-out
scoring during and after training) and the top-level helpers; never publishing or the CLI.
"""
