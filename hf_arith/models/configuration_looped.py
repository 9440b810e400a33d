"""Configuration for the looped family: a block of K abacus GPT-2 layers applied N times.

A subclass of `AbacusGPT2Config`: every abacus option (and its validation) is the abacus GPT-2
family's, and the looped options are checked on top. Shipped as Hub remote code: imports only
transformers and sibling files.
"""

from .configuration_abacus_gpt2 import AbacusGPT2Config

# The most recurrences a forward pass accepts: far beyond any useful depth, but it turns a typo
# (num_recurrences=10000) into an error instead of a run that never finishes.
MAX_RECURRENCES = 256


def check_num_recurrences(value, what: str = "num_recurrences") -> int:
    """Return `value` if it is an int in [1, MAX_RECURRENCES]; else one clear ValueError."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_RECURRENCES:
        raise ValueError(f"{what} must be an integer between 1 and {MAX_RECURRENCES}, got {value!r}")
    return value


class LoopedConfig(AbacusGPT2Config):
    r"""
    Looped (recurrent-depth) transformer of McLeish et al. 2024 (arXiv 2405.17399): the
    `num_hidden_layers` distinct abacus GPT-2 blocks form one recurrent block that is applied
    `num_recurrences` times, so depth grows with the loop count while the parameters do not.
    The paper's shapes are (num_hidden_layers x num_recurrences) 1x16, 8x2 and 16x1.

    Args (beyond `AbacusGPT2Config`'s, which are all accepted and validated the same way):
        num_recurrences: default loop count N, used when forward/generate get no `num_recurrences`.
            Test time may use another count (more loops than in training is the family's point).
        input_injection: add the embedded input back to the hidden state before every pass (the
            paper's recall / input injection). Without it the input is seen by the first pass only.
        progressive_loss_alpha: training loss mix, `alpha * full-depth loss + (1 - alpha) *
            progressive loss`. 1 trains the full depth only (a plain LM loss); 0 trains the
            progressive loss only. Note Bansal et al. 2022 call the *progressive* weight alpha,
            i.e. their alpha is `1 - progressive_loss_alpha`.
        progressive_max_k: the largest number k of recurrences with gradient in the progressive
            loss; None means N // 2 (at least 1), the paper's k <= N/2.

    `num_future_tokens` must stay 1: the looped family has a single output head.
    """

    model_type = "hf_arith_looped"

    def __init__(
        self,
        num_recurrences: int = 4,
        input_injection: bool = True,
        progressive_loss_alpha: float = 0.5,
        progressive_max_k: int | None = None,
        **kwargs,
    ):
        self.num_recurrences = num_recurrences
        self.input_injection = input_injection
        self.progressive_loss_alpha = progressive_loss_alpha
        self.progressive_max_k = progressive_max_k
        super().__init__(**kwargs)  # sets the abacus fields, then runs self._validate()

    def _validate(self):
        super()._validate()
        name = type(self).__name__
        check_num_recurrences(self.num_recurrences, f"{name}.num_recurrences")
        if not isinstance(self.input_injection, bool):
            raise ValueError(f"{name}.input_injection must be true or false, got {self.input_injection!r}")
        alpha = self.progressive_loss_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"{name}.progressive_loss_alpha must lie in [0, 1], got {alpha!r}")
        k = self.progressive_max_k
        if k is not None:
            check_num_recurrences(k, f"{name}.progressive_max_k")
        if self.abacus_window_layers:
            raise ValueError(f"{name}.abacus_window_layers must be 0 (a looped model repeats its blocks, so each "
                             f"reads through the window), got {self.abacus_window_layers!r}")
        if self.num_future_tokens != 1:
            raise ValueError(f"{name}.num_future_tokens must be 1 (looped models have one output head), "
                             f"got {self.num_future_tokens!r}")


__all__ = ["MAX_RECURRENCES", "LoopedConfig", "check_num_recurrences"]
