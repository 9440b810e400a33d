"""A character-level tokenizer that owns the number format.

`tok("123+456")` parses the plain decimal problem, writes it in the model's format (base,
digit order, padding) and tokenizes that. `tok.decode_answers(generated_ids)` turns generated
tokens back into plain decimal. The format is stored in tokenizer_config.json under
`number_format`. Shipped as Hub remote code: imports only transformers, tokenizers and the
sibling `formatting` module.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers.tokenization_utils_tokenizers import TokenizersBackend

from .formatting import EOS_TOKEN, PAD_TOKEN, FormatError, NumberFormat, decode_answer, parse_problems, render


def build_backend(fmt: NumberFormat) -> Tokenizer:
    vocab = {token: i for i, token in enumerate(fmt.vocab())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=None))
    # One token per character; Fuse joins them back without spaces on decode.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(""), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


class ArithTokenizer(TokenizersBackend):
    model_input_names = ["input_ids", "attention_mask"]
    padding_side = "left"  # prompts are left-padded so every row's answer starts at the same step

    def __init__(self, number_format: dict | NumberFormat | None = None, tokenizer_object=None, **kwargs):
        if isinstance(number_format, NumberFormat):
            fmt = number_format
        else:
            fmt = NumberFormat.from_dict(number_format or {})
        if tokenizer_object is None and not kwargs.get("tokenizer_file"):
            tokenizer_object = build_backend(fmt)
        kwargs.setdefault("pad_token", PAD_TOKEN)
        kwargs.setdefault("eos_token", EOS_TOKEN)
        kwargs.setdefault("bos_token", None)
        kwargs.setdefault("unk_token", None)
        kwargs.setdefault("padding_side", "left")
        super().__init__(tokenizer_object=tokenizer_object, **kwargs)
        self.arith_format = fmt  # not "number_format": save_pretrained would serialize the attribute
        self.init_kwargs["number_format"] = fmt.to_dict()
        self._vocab_list = fmt.vocab()

    # -- the format --------------------------------------------------------------------
    def format_problems(self, problems: list[str]) -> list[str]:
        """Plain decimal problems to prompts in the model's format ('12+34' -> '21+43=')."""
        ids, lengths, _ = render(parse_problems(problems, self.arith_format), self.arith_format, with_answer=False)
        return ["".join(self._vocab_list[i] for i in row[:n]) for row, n in zip(ids.tolist(), lengths.tolist())]

    def format_problem(self, problem: str) -> str:
        return self.format_problems([problem])[0]

    def decode_answers(self, generated) -> list[str | None]:
        """Generated answer ids ([n, T] tensor or lists) to plain decimal; None where malformed."""
        rows = generated.tolist() if hasattr(generated, "tolist") else generated
        out = []
        for row in rows:
            tokens = [self._vocab_list[i] if 0 <= i < len(self._vocab_list) else "?" for i in row]
            out.append(decode_answer(tokens, self.arith_format))
        return out

    def _check_characters(self, texts: list[str]) -> None:
        vocab = set(self._vocab_list)
        for text in texts:
            stripped = text
            for special in (PAD_TOKEN, EOS_TOKEN):
                stripped = stripped.replace(special, "")
            bad = next((c for c in stripped if c not in vocab), None)
            if bad is not None:
                raise FormatError(f"{text!r}: character {bad!r} is not in this tokenizer's vocabulary")

    def _encode_plus(self, text, text_pair=None, *args, format_problems: bool = True, **kwargs):
        """Format plain problems before tokenizing; format_problems=False takes formatted text."""
        if text_pair is not None:
            raise FormatError("arithmetic tokenizers take single problems, not text pairs")
        if not kwargs.get("is_split_into_words"):
            single = isinstance(text, str)
            texts = [text] if single else list(text)
            if format_problems:
                texts = self.format_problems(texts)
            else:
                self._check_characters(texts)
            text = texts[0] if single else texts
        return super()._encode_plus(text, None, *args, **kwargs)
