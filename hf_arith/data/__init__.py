"""Data: the first stage of the path problem -> tokens -> model -> answer -> score.

Holds the tasks (`tasks/`, one module per task: syntax, sampling, exact answer, written forms),
the number format (`formatting`), the tokenizer (`tokenization_arith`), problem sets and splits
(`problems`), the training stream (`streaming`), the `datasets` builder (`dataset_builder`) and
its Parquet export (`dataset_export`), and the package's error type (`errors`).

May import: the standard library, numpy, tokenizers, transformers' tokenizer base, `datasets`,
and the top-level helpers (`hf_arith.hub`, `hf_arith.records`, `hf_arith.text`); never models,
runtime, training, evaluation, publishing or the CLI. `errors`, `formatting`, `tokenization_arith`
and the task modules travel with every saved model as Hub remote code, copied flat: they import
one another with single-dot imports only, and nothing outside this folder.
"""
