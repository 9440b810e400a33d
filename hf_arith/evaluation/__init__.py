"""Evaluation: scoring a model on problems it never saw.

Holds exact-match metrics (`metrics`, and the `evaluate` module in `metric/`), held-out evaluation
and AdderBoard-style verification (`held_out`), the length-generalization grid (`grid`), stress
sets of hard cases (`stress`), a model's summary (`model_summary`), attention maps
(`attention_maps`) and figures (`plots`).

May import: `hf_arith.data`, `hf_arith.models`, `hf_arith.runtime` and the top-level helpers; never
training, publishing or the CLI.
"""
