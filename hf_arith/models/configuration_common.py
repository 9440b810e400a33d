"""The base of every family's configuration: the token ids and tied head all families share, and
validation that rejects a malformed config with one line naming the field, before torch sees it.

Shipped as Hub remote code beside the family's configuration file: imports only transformers. Every
family's code loads this file first, so it says in one line which transformers the code needs (the
transformers 5 API: `PreTrainedConfig`, `transformers.initialization`, `Cache` objects) before an older
release fails on an import deep inside.
"""

import transformers

# The oldest transformers release this code runs on (hf_arith's own requirement, `pyproject.toml`).
MIN_TRANSFORMERS_VERSION = (5, 23)


def check_transformers_version(version: str = transformers.__version__) -> None:
    """Refuse, in one line, a transformers older than MIN_TRANSFORMERS_VERSION."""
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    if tuple(parts) < MIN_TRANSFORMERS_VERSION:
        need = ".".join(map(str, MIN_TRANSFORMERS_VERSION))
        raise ImportError(f"this model's code needs transformers>={need} (installed: {version}); upgrade with "
                          f"pip install -U 'transformers>={need},<6'")


check_transformers_version()

from transformers import PreTrainedConfig  # noqa: E402  (after the version check: older releases lack it)

# What a config records of the model's limits (None: not recorded).
LIMIT_FIELDS = ("max_operand_digits", "max_answer_tokens", "measured_max_digits")
MAX_ANSWER_VIEWS = 16  # config.answer_views: each view is one more decode of every problem


class ArithConfig(PreTrainedConfig):
    """Subclasses set their own fields, then call `super().__init__(**kwargs)`, which runs `_validate`.

    What the model takes, recorded when it is paired with its tokenizer (hf_arith's training, loading and
    `save_checkpoint`; None until then), so that the model alone knows it, whatever saves it:
        max_operand_digits: its hard limit, the longest operand it accepts (its context and abacus range
            hold every problem of that length); not where it answers right.
        max_answer_tokens: new tokens the longest answer it can be asked for takes, `<eos>` included: the
            saved generation config's `max_new_tokens` (`ArithModelMixin.apply_generation_defaults`).
    and where it was measured to answer, recorded with its evaluation (`hf-arith push`, the bundled models):
        measured_max_digits: every operand length from 1 to this was measured at >= 99 % exact match on
            held-out problems (`hf_arith.runtime.limits.measured_max_digits`); at most max_operand_digits.
    and how it answers by default:
        answer_views: views of each problem it answers, the answer most of them give winning (1 to
            MAX_ANSWER_VIEWS; 1: the problem as given only). See `hf_arith.runtime.answer_views`.
    """

    def __init__(self, tie_word_embeddings: bool = True, pad_token_id: int | None = None,
                 eos_token_id: int | None = None, bos_token_id: int | None = None,
                 max_operand_digits: int | None = None, max_answer_tokens: int | None = None,
                 measured_max_digits: int | None = None, answer_views: int = 1, **kwargs):
        self.max_operand_digits, self.max_answer_tokens = max_operand_digits, max_answer_tokens
        self.measured_max_digits, self.answer_views = measured_max_digits, answer_views
        self.check_integers([f for f in LIMIT_FIELDS if getattr(self, f) is not None] + ["answer_views"])
        if answer_views > MAX_ANSWER_VIEWS:
            raise ValueError(f"{type(self).__name__}.answer_views must be at most {MAX_ANSWER_VIEWS} (each view is "
                             f"one more decode of every problem), got {answer_views!r}")
        self._validate()
        super().__init__(tie_word_embeddings=tie_word_embeddings, pad_token_id=pad_token_id,
                         eos_token_id=eos_token_id, bos_token_id=bos_token_id, **kwargs)

    def _validate(self) -> None:
        """Each family checks its fields here."""

    def check_integers(self, fields, minimum: int = 1) -> None:
        for field in fields:
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
                raise ValueError(f"{type(self).__name__}.{field} must be {what}, got {value!r}")


__all__ = ["LIMIT_FIELDS", "MAX_ANSWER_VIEWS", "MIN_TRANSFORMERS_VERSION", "ArithConfig", "check_transformers_version"]
