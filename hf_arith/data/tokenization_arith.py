"""A character-level tokenizer that owns the number format.

`tok("123+456")` parses the plain decimal problem, writes it in the model's format (base,
digit order, padding) and tokenizes that; `tok(problem, text_target=answer)` adds `labels`, the
answer's tokens (-100 on the prompt), as training uses them; `tok("123+456=579")`, a whole problem as
`decode` writes it, gives the `input_ids` of that same sequence. `tok.decode_answers(generated_ids)` turns
generated tokens back into plain decimal, and so does `tok.decode(ids)` for a whole sequence
('784+55482=56266'; `raw=True` gives the model's own format). A problem is never cut: truncation
that would cut one raises. The format is stored in tokenizer_config.json under
`number_format`. Shipped as Hub remote code: imports only transformers, tokenizers and the
sibling `formatting` module.
"""

from __future__ import annotations

import json
import os

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers.tokenization_utils_base import BatchEncoding, PaddingStrategy, TruncationStrategy
from transformers.tokenization_utils_tokenizers import TokenizersBackend

from .formatting import (
    EOS_TOKEN,
    PAD_TOKEN,
    PROMPT_END,
    FormatError,
    NumberFormat,
    Problems,
    decode_answer,
    get_task,
    parse_problems,
    plain_text,
    quote,
    render,
    render_answers,
    write_task_code,
)

# The config key (and tokenizer_config key) holding NumberFormat.fingerprint() of the format a model was trained on.
FINGERPRINT_KEY = "number_format_fingerprint"
# What a model whose config has no fingerprint is checked on, against the formats its folder records
# (`recorded_formats`): the task (and so its operator), the base and the digit order.
CHECKED_FORMAT_FIELDS = ("task", "base", "reverse_operands", "reverse_answer")
# The label of a token that carries no loss: what transformers' losses skip (the models' IGNORE_INDEX too).
LABEL_IGNORE = -100


def recorded_formats(folder) -> list[tuple[str, dict]]:
    """The number formats a checkpoint folder records besides a fingerprint, as (where, format dict):
    its training summary's recipe format, then its own tokenizer_config.json's. Unreadable files count
    as no record (loading refuses them separately)."""
    found = []
    if not folder or not os.path.isdir(str(folder)):
        return found
    sources = (("training_summary.json", ("recipe", "format"), "training_summary.json's recipe format"),
               ("tokenizer_config.json", ("number_format",), "the model folder's tokenizer_config.json"))
    for name, keys, where in sources:
        try:
            with open(os.path.join(str(folder), name), encoding="utf-8") as f:
                data = json.load(f)
            for key in keys:
                data = data[key]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(data, dict):
            found.append((where, data))
    return found


def _describe(values: dict) -> str:
    task = values.get("task")
    order = {(True, True): "digits reversed", (False, False): "digits in reading order"}.get(
        (values.get("reverse_operands"), values.get("reverse_answer")),
        f"operands {'reversed' if values.get('reverse_operands') else 'in reading order'}, answer "
        f"{'reversed' if values.get('reverse_answer') else 'in reading order'}")
    try:
        rules = get_task(task)
        name, sign = rules.title, (f" '{rules.operator}'" if rules.operator else "")
    except FormatError:  # a task this installation does not know
        name, sign = str(task), ""
    return f"{name}{sign}, base {values.get('base')}, {order}"


def build_backend(fmt: NumberFormat) -> Tokenizer:
    vocab = {token: i for i, token in enumerate(fmt.vocab())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=None))
    # One token per character; Fuse joins them back without spaces on decode.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(""), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


def split_answers(texts: list[str]) -> tuple[list[str], list[str] | None]:
    """Plain problems, each perhaps followed by '=' and its answer ('12+34=46', what `decode` writes), as
    (problems, answers): answers None when none gives one ('12+34' and '12+34=' are prompts). Some with an
    answer and some without is a one-line FormatError: a batch is either prompts or whole sequences."""
    problems, answers = [], []
    for text in texts:
        problem, sign, answer = text.rpartition(PROMPT_END) if isinstance(text, str) else ("", "", text)
        problems.append(problem if sign else text)
        answers.append(answer.strip() if sign and answer.strip() else None)
    given = [a is not None for a in answers]
    if not any(given):
        return problems, None
    if not all(given):
        raise FormatError(f"{quote(texts[given.index(False)])} has no answer but {quote(texts[given.index(True)])} "
                          "has one: encode prompts ('12+34') and whole problems ('12+34=46') in separate calls")
    return problems, answers


class ArithTokenizer(TokenizersBackend):
    model_input_names = ["input_ids", "attention_mask"]
    padding_side = "left"  # prompts are left-padded so every row's answer starts at the same step

    def __init__(self, number_format: dict | NumberFormat | None = None, tokenizer_object=None, **kwargs):
        kwargs.pop(FINGERPRINT_KEY, None)  # always recomputed from the format (loading compares them)
        if isinstance(number_format, NumberFormat):
            fmt = number_format
        elif number_format is None and kwargs.get("name_or_path"):
            # Loaded from a folder whose tokenizer_config.json has no format: guessing one would
            # silently mis-format every problem for the model.
            raise FormatError(f"{kwargs['name_or_path']}: tokenizer_config.json has no number_format, "
                              "so the tokenizer cannot know how to write problems for its model")
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
        # Saved beside the format; the model's config.json holds the same, and loading compares the two.
        self.init_kwargs[FINGERPRINT_KEY] = fmt.fingerprint()
        # from_pretrained passes these along; saved back they would bloat tokenizer_config.json
        # (the vocabulary lives in tokenizer.json) and record where the files were read from.
        for key in ("vocab", "is_local", "local_files_only"):
            self.init_kwargs.pop(key, None)
        self._vocab_list = fmt.vocab()

    def save_pretrained(self, save_directory, *args, **kwargs):
        """As transformers saves a tokenizer; with remote code, the module of its task goes along
        (`write_task_code`), so the folder loads where this package is not installed."""
        files = super().save_pretrained(save_directory, *args, **kwargs)
        write_task_code(save_directory, self.arith_format.task)
        return files

    # -- the model it belongs to --------------------------------------------------------
    def check_model(self, model_or_config) -> None:
        """Refuse, in one line (FormatError), a model this tokenizer does not write problems for.

        The one check of a model and its tokenizer, on every path (the package's `load` and `solve`, the
        `arithmetic` pipeline, the Space). The config's `number_format_fingerprint` (written by training
        and `save_checkpoint`) must be this format's. A config without one is checked on the format its
        folder records (`recorded_formats`: the task and so its operator, base and digit order), then on
        what every config has: the vocabulary holds these tokens, digit tokens are the base's digits, and
        the end, padding and answer-start (`=`) token ids are these."""
        config = getattr(model_or_config, "config", model_or_config)
        fmt = self.arith_format
        saved, own = getattr(config, FINGERPRINT_KEY, None), fmt.fingerprint()
        if saved is not None and saved != own:
            raise FormatError(f"the tokenizer writes problems in another number format than this model was trained "
                              f"on (tokenizer {own}, config.{FINGERPRINT_KEY} {saved}); load the tokenizer saved "
                              "with the model")
        if saved is None:
            mine = fmt.to_dict()
            defaults = NumberFormat().to_dict()
            for where, recorded in recorded_formats(getattr(config, "_name_or_path", None)):
                theirs = {k: recorded.get(k, defaults[k]) for k in CHECKED_FORMAT_FIELDS}
                if any(theirs[k] != mine[k] for k in CHECKED_FORMAT_FIELDS):
                    raise FormatError(f"the tokenizer writes {_describe(mine)}, but this model was trained on "
                                      f"{_describe(theirs)} ({where}); load the tokenizer saved with the model")
        vocab = getattr(config, "vocab_size", None)
        if isinstance(vocab, int) and len(self) > vocab:
            raise FormatError(f"the tokenizer has {len(self)} tokens but the model only {vocab}; they do not belong "
                              "together")
        expected = {"num_digit_tokens": fmt.base, "answer_start_token_id": fmt.token_id(PROMPT_END),
                    "eos_token_id": self.eos_token_id, "pad_token_id": self.pad_token_id}
        for key, value in expected.items():
            have = getattr(config, key, None)
            if isinstance(have, int) and isinstance(value, int) and have != value:
                raise FormatError(f"the tokenizer does not belong to this model: config.{key} is {have}, but the "
                                  f"tokenizer's number format gives {value}; load the tokenizer saved with the model")

    # -- the format --------------------------------------------------------------------
    def format_problems(self, problems: list[str]) -> list[str]:
        """Plain decimal problems to prompts in the model's format ('12+34' -> '21+43=')."""
        ids, lengths, _ = render(parse_problems(problems, self.arith_format), self.arith_format, with_answer=False)
        return ["".join(self._vocab_list[i] for i in row[:n]) for row, n in zip(ids.tolist(), lengths.tolist())]

    def format_problem(self, problem: str) -> str:
        return self.format_problems([problem])[0]

    def answer_budget(self, problems: list[str]) -> int:
        """New tokens the longest answer to these plain problems may take (sign and <eos> included):
        the `max_new_tokens` a decoder needs for them."""
        return self.arith_format.max_answer_tokens(parse_problems(problems, self.arith_format))

    def operand_digits(self, problems: list[str]) -> list[int]:
        """Per plain problem: the digits of its longest operand in the format's base (what a model's
        `config.max_operand_digits` bounds)."""
        return parse_problems(problems, self.arith_format).lengths.max(axis=1).tolist()

    def decode_answers(self, generated, problems=None) -> list[str | None]:
        """Generated answer ids ([n, T] tensor or lists) to plain decimal; None where malformed
        (in a format with an end token, also where no <eos> follows the answer). `problems`, the
        plain problems the rows answer, also holds written working (running sums, radix passes) to each
        problem's shape."""
        rows = _answer_rows(generated)
        lengths = [None] * len(rows)
        if problems is not None:
            parsed = problems if isinstance(problems, Problems) else parse_problems(problems, self.arith_format)
            if len(parsed) != len(rows):
                raise FormatError(f"{len(rows)} rows of generated ids answer {len(parsed)} problems")
            lengths = parsed.lengths
        out = []
        for row, operand_lengths in zip(rows, lengths):
            tokens = [self._vocab_list[i] if 0 <= i < len(self._vocab_list) else "?" for i in row]
            out.append(decode_answer(tokens, self.arith_format, operand_lengths))
        return out

    def __call__(self, text=None, text_pair=None, text_target=None, text_pair_target=None, **kwargs):
        """As any tokenizer; `text_target` (the answers, plain decimal) adds `labels`: the whole
        sequence as training sees it (prompt, answer with its written working, <eos>) in
        `input_ids`, and in `labels` the answer tokens, LABEL_IGNORE on the prompt and the padding."""
        if text_target is None and text_pair_target is None:
            return super().__call__(text, text_pair, **kwargs)
        if text is None or text_pair is not None or text_pair_target is not None:
            raise FormatError("text_target needs the problems as text (one answer per problem), and no text pairs")
        return self._encode_with_answers(text, text_target, **kwargs)

    def _encode_with_answers(self, text, text_target, padding=False, truncation=None, max_length=None,
                             return_tensors=None, return_attention_mask=None, padding_side=None, whole=False, **_):
        single = isinstance(text, str)
        texts, answers = ([text], [text_target]) if single else (list(text), list(text_target))
        if single != isinstance(text_target, str) or len(texts) != len(answers):
            raise FormatError(f"text_target must give one answer per problem: {len(texts)} problem(s), "
                              f"{1 if isinstance(text_target, str) else len(answers)} answer(s)")
        problems = parse_problems(texts, self.arith_format).with_answers()
        for problem, given, exact in zip(texts, answers, problems.answer_text()):
            if str(given).strip() != exact:
                shown, what = (f"{problem}={given}", "a whole problem is encoded with") if whole else (problem, "the labels are")
                raise FormatError(f"{quote(shown)}: {quote(str(given))} is not its answer ({exact}); {what} the exact "
                                  "answer written in the model's format")
        ids, lengths, answer = render_answers(problems, self.arith_format)
        self._check_length(texts, lengths, truncation, max_length)
        strategy = PaddingStrategy(padding if not isinstance(padding, bool) else ("longest" if padding else "do_not_pad"))
        pad = strategy != PaddingStrategy.DO_NOT_PAD
        if not pad and return_tensors is not None and len(set(lengths.tolist())) > 1:
            raise FormatError("problems of different lengths need padding=True to become one tensor")
        width = int(lengths.max())
        if strategy == PaddingStrategy.MAX_LENGTH:
            width = max(width, max_length or self.model_max_length)
        left = (padding_side or self.padding_side) == "left"
        rows = {"input_ids": [], "attention_mask": [], "labels": []}
        for row, n, mask in zip(ids.tolist(), lengths.tolist(), answer.tolist()):
            fill = width - n if pad else 0
            tokens = row[:n]
            labels = [t if m else LABEL_IGNORE for t, m in zip(tokens, mask[:n])]
            parts = {"input_ids": (tokens, self.pad_token_id), "attention_mask": ([1] * n, 0),
                     "labels": (labels, LABEL_IGNORE)}
            for key, (values, filler) in parts.items():
                rows[key].append([filler] * fill + values if left else values + [filler] * fill)
        if return_attention_mask is False:
            del rows["attention_mask"]
        data = {k: v[0] for k, v in rows.items()} if single and return_tensors is None else rows
        return BatchEncoding(data, tensor_type=return_tensors)

    def _check_length(self, texts, lengths, truncation, max_length) -> None:
        """Truncation never cuts a problem: a sequence longer than the limit is refused in one line."""
        if truncation in (None, False, "do_not_truncate", TruncationStrategy.DO_NOT_TRUNCATE):
            return
        limit = max_length or self.model_max_length
        longest = int(np.argmax(lengths))
        if limit is not None and int(lengths[longest]) > limit:
            raise FormatError(f"{quote(texts[longest])} takes {int(lengths[longest])} tokens, more than max_length "
                              f"{limit}; truncating would cut the problem, so it is refused (raise max_length, or drop "
                              "truncation)")

    def _decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None, raw=False, **kwargs):
        """Ids to text. A sequence of this format (prompt and answer, either alone, padded or not) reads in
        plain decimal (`formatting.plain_text`: '784+55482=56266'), whatever skip_special_tokens says;
        `raw=True` gives the tokens as the model reads and writes them ('48455+28455=66265000000<eos>')."""
        if raw:
            return super()._decode(token_ids, skip_special_tokens=skip_special_tokens,
                                   clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if isinstance(token_ids, dict):
            token_ids = token_ids["input_ids"]
        vocab = self._vocab_list
        return plain_text([vocab[i] if 0 <= i < len(vocab) else "?" for i in token_ids], self.arith_format)

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
        """Format plain problems before tokenizing; format_problems=False takes formatted text. A whole
        problem with its answer ('12+34=46', as `decode` writes it) encodes as training writes it (`_encode_whole`)."""
        if text_pair is not None:
            raise FormatError("arithmetic tokenizers take single problems, not text pairs")
        if not kwargs.get("is_split_into_words"):
            if not isinstance(text, (str, list, tuple)):
                raise FormatError(f"text must be a problem (a string) or a list of problems, got {type(text).__name__}")
            single = isinstance(text, str)
            texts = [text] if single else list(text)
            if format_problems:
                texts, answers = split_answers(texts)
                if answers is not None:
                    return self._encode_whole(texts[0] if single else texts, answers[0] if single else answers, kwargs)
            if kwargs.get("truncation_strategy") not in (None, TruncationStrategy.DO_NOT_TRUNCATE):
                # A problem is never cut: longer than the limit is refused, else nothing is cut at all.
                # (Formatted text has one token per character.)
                lengths = (render(parse_problems(texts, self.arith_format), self.arith_format, with_answer=False)[1]
                           if format_problems else np.array([len(t) for t in texts]))
                self._check_length(texts, lengths, kwargs["truncation_strategy"], kwargs.get("max_length"))
                kwargs["truncation_strategy"] = TruncationStrategy.DO_NOT_TRUNCATE
            if format_problems and self._can_encode_directly(kwargs):
                return self._encode_problems(texts, single, **kwargs)
            if format_problems:
                texts = self.format_problems(texts)
            else:
                self._check_characters(texts)
            text = texts[0] if single else texts
        return super()._encode_plus(text, None, *args, **kwargs)

    def _encode_whole(self, problems, answers, kwargs) -> BatchEncoding:
        """Problems with their answers as the whole sequences a model trained on this format reads (prompt,
        answer with its written working, <eos>): `tok(problem, text_target=answer)` without the labels."""
        encoded = self._encode_with_answers(
            problems, answers, padding=kwargs.get("padding_strategy", PaddingStrategy.DO_NOT_PAD),
            truncation=kwargs.get("truncation_strategy"), max_length=kwargs.get("max_length"),
            return_tensors=kwargs.get("return_tensors"), return_attention_mask=kwargs.get("return_attention_mask"),
            padding_side=kwargs.get("padding_side"), whole=True)
        del encoded["labels"]
        return encoded

    @staticmethod
    def _can_encode_directly(kwargs) -> bool:
        simple = not any(kwargs.get(k) for k in (
            "return_overflowing_tokens", "return_special_tokens_mask", "return_offsets_mapping",
            "return_length", "return_token_type_ids"))
        truncation = kwargs.get("truncation_strategy", TruncationStrategy.DO_NOT_TRUNCATE)
        return simple and truncation == TruncationStrategy.DO_NOT_TRUNCATE and kwargs.get("return_tensors") in (None, "pt", "np")

    def _encode_problems(self, texts, single, padding_strategy=PaddingStrategy.DO_NOT_PAD, max_length=None,
                         pad_to_multiple_of=None, padding_side=None, return_tensors=None,
                         return_attention_mask=None, **_):
        """Problems straight to ids through `render`: the same ids as tokenizing the formatted
        strings, without the string round trip (10,000 prompts in milliseconds, not seconds)."""
        ids, lengths, _ = render(parse_problems(texts, self.arith_format), self.arith_format, with_answer=False)
        pad = padding_strategy != PaddingStrategy.DO_NOT_PAD
        if not pad and return_tensors is not None and len(set(lengths.tolist())) > 1:
            raise FormatError("problems of different lengths need padding=True to become one tensor")
        width = int(lengths.max())
        if padding_strategy == PaddingStrategy.MAX_LENGTH and max_length:
            width = max(width, max_length)
        if pad_to_multiple_of:
            width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        left = (padding_side or self.padding_side) == "left"
        cols = np.arange(width)[None, :]
        start = (width - lengths)[:, None] if left else np.zeros_like(lengths)[:, None]
        mask = (cols >= start) & (cols < start + lengths[:, None])
        input_ids = np.full((len(texts), width), self.pad_token_id, dtype=np.int64)
        input_ids[mask] = ids[np.arange(ids.shape[1])[None, :] < lengths[:, None]]
        data = {"input_ids": input_ids}
        if return_attention_mask is not False:
            data["attention_mask"] = mask.astype(np.int64)
        if return_tensors == "pt":
            import torch

            data = {k: torch.from_numpy(v) for k, v in data.items()}
        elif return_tensors is None:
            data = {k: [row[m].tolist() if not pad else row.tolist() for row, m in zip(v, mask)] for k, v in data.items()}
            if single:
                data = {k: v[0] for k, v in data.items()}
        return BatchEncoding(data)


def _answer_rows(generated) -> list[list[int]]:
    """`decode_answers`' input as rows of token ids: a 2-D integer tensor or array ([n, T]), or a list of
    lists of ints; anything else is a one-line FormatError naming the argument."""
    if hasattr(generated, "ndim") and hasattr(generated, "dtype"):  # a torch tensor or a numpy array
        dtype = str(generated.dtype)
        if generated.ndim != 2:
            raise FormatError(f"generated must be a 2-D [rows, tokens] array of token ids, got {generated.ndim} "
                              f"dimension(s) of shape {tuple(generated.shape)}")
        if "int" not in dtype:
            raise FormatError(f"generated must hold integer token ids, got dtype {dtype}")
        return generated.tolist()
    if not isinstance(generated, (list, tuple)):
        raise FormatError(f"generated must be a 2-D tensor or a list of lists of token ids, "
                          f"got {type(generated).__name__}")
    for row in generated:
        if not isinstance(row, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in row):
            shown = type(row).__name__ if not isinstance(row, (list, tuple)) else "a row with non-integer ids"
            raise FormatError(f"generated must be a list of lists of integer token ids, got {shown}")
    return [list(row) for row in generated]
