"""Runtime: from a model folder on disk to an answer.

Holds loading a checkpoint (`loading`), what a model accepts and where it was trained (`limits`,
the one module that knows a model's limits), batched greedy decoding (`decoding`), `solve`
(`solving`), the `arithmetic` pipeline (`pipeline_arithmetic`), saving a folder that loads with or
without hf_arith (`saving`) and the machine's threads and memory (`hardware`).

May import: `hf_arith.data`, `hf_arith.models` and the top-level helpers; never training,
evaluation, publishing or the CLI. `pipeline_arithmetic`, `decoding` and `hardware` travel with a
saved model as remote code, copied flat: they import only torch, transformers and one another.
"""
