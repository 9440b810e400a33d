"""Configuration for the abacus GPT-2 family: GPT-2 blocks with per-digit (abacus) positions.

Shipped as Hub remote code: imports only transformers and sibling files.
"""

from .configuration_common import ArithConfig


class AbacusGPT2Config(ArithConfig):
    r"""
    Args:
        vocab_size: tokens in the tokenizer (digits first, so ids `0..num_digit_tokens-1` are digits).
        hidden_size, num_hidden_layers, num_attention_heads, intermediate_size (default 4 *
            hidden_size), activation_function, layer_norm_epsilon, resid_pdrop, embd_pdrop,
            attn_pdrop: GPT-2's shape and regularisation knobs. The default activation is GPT-2's
            tanh GELU as one fused kernel ("gelu_pytorch_tanh"); "gelu_new" computes the same in seven
            elementwise ops and took 40% of a batched evaluation's time.
        num_digit_tokens: the base; token ids below it are digits and get abacus positions.
        abacus_max_digits: rows of the abacus table, i.e. the longest number the model can position.
        abacus_max_offset: training draws a random k in [0, abacus_max_offset] added to every digit
            position (the paper's max_k = 100), so that indices beyond the training length get trained.
        abacus_offset_per_sequence: draw k per sequence instead of once per batch (the paper).
        abacus_offset_per_problem: training sequences may pack several problems, each closed by
            <eos> (recipe key data.context_problems): each problem draws its own k, and segments
            restart after each <eos>. Digits whose indices lie far apart then meet in one sequence,
            which one problem of short operands never gives. Needs abacus_offset_per_sequence and
            an eos_token_id (without one, nothing is packed and this changes nothing).
        abacus_unshifted_fraction: share of draws that keep k = 0 (0 in the paper), so the low
            indices that every number uses at test time are trained often enough.
        abacus_offset_all_tokens: the training offset also moves non-digit tokens (index 0 -> k), so
            the `=` before the answer keeps the "next index" relation to the first answer digit
            for every k (the paper shifts digits only).
        abacus_align_answer: give the `=` index 1 and answer digit i index i + 1, the index of the
            digit it predicts, so each answer step looks up operand digits of its own index.
            Needs `answer_start_token_id` (the `=` token's id).
        abacus_line_positions: answers written as lines joined by `=` (a sort scratchpad) give each
            non-digit answer token its line's number as its index, and every answer token its slot
            in its line as its segment (`abacus_positions.line_positions`), in place of the
            separator count. Needs `answer_start_token_id` and abacus_num_segments > the longest line.
        abacus_prompt_segments: with abacus_line_positions, prompt tokens keep the separator count as
            their segment (slot 0 otherwise), so each item's digits carry which item they belong to; a
            model without positions can only tell that by counting the labels before them, which grows
            less exact with every item. Needs abacus_num_segments > the prompt's separators.
        abacus_offset_items: with abacus_prompt_segments, training moves each row's prompt segments by
            a random k and its answer lines' slots by another (`abacus_positions.offset_item_segments`),
            so a model trained on short lists has trained segments and slots for longer ones. Pairs with
            the recipe key data.item_places, which moves the lists' labels the same way.
        abacus_even_offsets: every training offset (digit indices and lines, and with abacus_offset_items
            the prompt segments and line slots) is even, so each index and slot keeps its parity. Written
            working whose rounds alternate (the sort scratchpad transposition_rounds: round r compares the
            neighbours from place r mod 2) then reads which neighbour to compare from the parity of its
            line and slot, which odd offsets would hide. Needs abacus_max_offset >= 2.
        abacus_offset_segments: the share of training rows (0 to 1) whose answer segments (every token
            from the `answer_start_token_id` on) move by the row's offset k too. Long multiplication's
            line j works on digit j of b: in a moved row a line's segment keeps its relation to that
            digit's index for every k, so a model trained on b of 5 digits has trained segments for
            lines 6-10 as well; rows left in place keep every segment beside every index (a longer a
            puts line j's digits at indices its segment never met in a moved row). Needs
            answer_start_token_id and abacus_num_segments, and not abacus_line_positions (whose
            segments are slots in a line) or abacus_offset_per_problem.
        abacus_operand_rows: also add a learned row embedding that digit j of the prompt's last number
            (b) and answer line j share (`abacus_positions.operand_line_rows`; 0 for other prompt
            tokens), with a training offset of its own, uniform in [0, abacus_max_offset] (no
            abacus_unshifted_fraction). Long multiplication's line j then finds digit j of b by an
            equality of rows, at every row the offsets trained, whatever the digit indices. The
            row ids are packed into the segment slot of the position ids (`pack_rows`). Needs
            answer_start_token_id and abacus_num_segments > 0, and not abacus_line_positions,
            abacus_offset_segments or abacus_offset_per_problem.
        abacus_num_segments: also add a learned embedding of which number a token belongs to
            (`abacus_positions.segment_ids`: separators seen so far, capped at this many - 1);
            0 turns it off. Position ids then carry index and segment packed into one id.
        abacus_attention_window: > 0 limits attention between placed tokens (those with an abacus
            index: digits, and the `=` with abacus_align_answer) to indices at most this far apart,
            and lets unplaced tokens (`+`, <eos>, padding) attend to unplaced tokens only. Every
            query then sees the same keys whatever the operands' length (its index's neighbours in
            each number, and the separators), so no number of far digits can dilute a lookup, which
            is what stops a model trained on 20 digits from adding 100. 0 turns it off.
        abacus_row_window: the attention of long multiplication written as shifted sums, with
            abacus_operand_rows (`abacus_positions.row_window_allowed`): the token at index i of line j
            sees b's digits j and j + 1 by row, a's digits i - 1 and i, the line before at i + 1 and
            i + 2 and its own line at i - 1 and i; a prompt token sees itself, and b's digits carry
            no index. Every key set is then the same in a long line as in a short one, so what is
            trained on short operands holds for long ones. Needs abacus_align_answer and
            abacus_num_segments >= 3 (a, b, answer), and replaces abacus_attention_window (0).
        abacus_line_window: the attention of a sort written as lines of labels whose every label comes
            from a neighbouring slot of the line before (the scratchpads transposition_rounds,
            transposition_marked, transposition_keys and transposition_flags, where a label and its digit
            share a slot; `abacus_positions.line_window_allowed`), with abacus_prompt_segments:
            the token at slot q of line L sees slots q - 1 to q + 2 of line L - 1 (line 1: the prompt's
            items q - 1 to q + 2), itself and the prompt item its label names
            (`abacus_positions.label_items`); a prompt token sees its own item. Prompt tokens then carry
            their item's number as their segment (not the separator count), and with abacus_offset_items
            the prompt and the lines move by one k (item j and slot j stay one id). Every key set is then
            the same in a long list as in a short one. A round cannot count its line, so the written form
            must say where a place ends (transposition_marked, _keys or _flags). Replaces
            abacus_attention_window and abacus_row_window.
        abacus_marked_labels: with abacus_line_window and upper-case labels (transposition_marked, _keys or
            _flags), the id shift from a label to its marked (upper-case) form, which is the format's max_items, so a
            marked label names its item too. 0: no marked labels.
        abacus_line_end: with abacus_line_window, the token whose next slot is one past the line before's
            last label also sees the `=` that ends that line (`abacus_positions.closed_slots`), so a round
            ends by a key that is there rather than by one that is missing.
        abacus_pair_roles: with abacus_line_window, each answer token also gets an embedding of its slot's
            role in its round of an odd-even transposition sort: the parity of its slot plus the round
            (the line's number less one, modulo the list's items, since the rounds restart at each digit
            place; `abacus_positions.pair_roles`). A round pairs the slots of one parity with their right
            neighbour, so without it a slot far from the round's marker must tell the round's parity from
            its line's id alone, which lists of at most 5 items barely train. Measured on one-digit lists,
            it does not help there (docs/findings.md). "every_line": the round is the line's number less
            one, for transposition_flags, whose rounds alternate over every line and which has no marker.
        abacus_relation_bias: with abacus_line_window, the window's keys are told apart by what they are to
            the query (slot q - 1, q, q + 1 or q + 2 of the line before, itself, its named item, the line
            end: `abacus_positions.line_window_relations`) through a learned bias per head and relation,
            added to the windowed blocks' attention scores, and the slots and items are not embedded; an
            answer token's line number is not embedded either (the window reads it). A token's computation
            then holds no absolute slot, item or line, so it is the same at slot 15 of round 12 of a list of
            20 as at slot 3 of round 2 of a list of 5, by construction rather than by training offsets.
            Needs abacus_pair_roles, which then alone tells a slot's pairing (and which tokens are answers).
            The window counts the lines (`abacus_positions.answer_lines`), so a list may take more lines than
            abacus_max_digits.
        abacus_digit_places: with abacus_relation_bias, for transposition_next_keys or _unmarked (line L of
            a list of n items writes each label's digit at place L // n): a prompt digit at the place the
            query's line writes is a relation of its own, and the role also says whether the line is a
            place's first round (which marks slot 1) or the list's last line (where it ends). The digit to
            write is then one relation at every place, so what lists of 6-digit numbers train holds for 20
            digits. Prompt digits' places are read as written lowest first (format.reverse_operands).
            "narrow": those digits and the items' labels are all an answer token sees of the prompt, so
            its keys do not grow with the numbers' length.
        abacus_line_behind: with abacus_line_window, false takes slot q - 1 of the line before out of what the
            token at slot q sees. That token writes slot q + 1, from slot q + 1 of the line before or a
            neighbour (q or q + 2), never from q - 1; but a larger digit that has just moved from there into
            slot q is then in view twice, and in long lists (where such a digit moves on for many rounds) it
            leaks into the comparison of two equal digits at q + 1 and q + 2 (docs/findings.md).
        abacus_place_rows: with abacus_digit_places, false embeds no abacus row for prompt digits either: the
            place relation already finds the digit a line reads, so the row only tells a digit at place 12
            from one at place 2, which lists of at most 6 digits train through the random offsets alone.
            Without it no input a token sees depends on how far into a number a digit lies. Measured on two
            chains, it changes the misses past 6 digits little (docs/findings.md).
        abacus_window_layers: with abacus_attention_window, abacus_row_window or abacus_line_window, > 0 lets only the
            first this-many blocks read through the window; the blocks above see only their own
            token. Through every block a window's reach adds up (a token reads a neighbour that read
            its neighbours), so in a deep model a digit depends on digits a long line has and a
            short one never had. With the window in the first blocks only, each token depends on
            the tokens within that many window steps. 0: every block reads through the window.
        abacus_period: > 0 gives the abacus table this many indices and index i the row
            1 + (i - 1) mod abacus_period, so no table bounds the length: with an attention window
            (required, and abacus_period > 2 * abacus_attention_window + 1, so the indices one query
            sees keep distinct rows) what a digit looks up depends only on its neighbours' offsets.
            abacus_max_digits is then only the longest number the model accepts. 0 turns it off.
        absolute_position_embedding: also add a learned absolute position (GPT-2's wpe), over
            `max_position_embeddings` tokens.
        max_position_embeddings: the longest sequence the model accepts.
        num_future_tokens: output heads; head j predicts the token j positions after the next one,
            so decoding can emit up to this many tokens per forward pass.
    """

    model_type = "hf_arith_abacus_gpt2"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size: int = 17,
        hidden_size: int = 64,
        num_hidden_layers: int = 4,
        num_attention_heads: int = 4,
        intermediate_size: int | None = None,
        activation_function: str = "gelu_pytorch_tanh",
        layer_norm_epsilon: float = 1e-5,
        resid_pdrop: float = 0.0,
        embd_pdrop: float = 0.0,
        attn_pdrop: float = 0.0,
        num_digit_tokens: int = 10,
        abacus_max_digits: int = 128,
        abacus_max_offset: int = 100,
        abacus_offset_per_sequence: bool = False,
        abacus_offset_per_problem: bool = False,
        abacus_unshifted_fraction: float = 0.0,
        abacus_offset_all_tokens: bool = False,
        abacus_align_answer: bool = False,
        answer_start_token_id: int | None = None,
        abacus_num_segments: int = 0,
        abacus_offset_segments: float = 0.0,
        abacus_operand_rows: bool = False,
        abacus_line_positions: bool = False,
        abacus_prompt_segments: bool = False,
        abacus_offset_items: bool = False,
        abacus_even_offsets: bool = False,
        abacus_attention_window: int = 0,
        abacus_row_window: bool = False,
        abacus_line_window: bool = False,
        abacus_marked_labels: int = 0,
        abacus_line_end: bool = False,
        abacus_pair_roles: bool | str = False,
        abacus_relation_bias: bool = False,
        abacus_digit_places: bool | str = False,
        abacus_line_behind: bool = True,
        abacus_place_rows: bool = True,
        abacus_window_layers: int = 0,
        abacus_period: int = 0,
        absolute_position_embedding: bool = False,
        max_position_embeddings: int = 1024,
        num_future_tokens: int = 1,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = 4 * hidden_size if intermediate_size is None else intermediate_size
        self.activation_function = activation_function
        self.layer_norm_epsilon = layer_norm_epsilon
        self.resid_pdrop, self.embd_pdrop, self.attn_pdrop = resid_pdrop, embd_pdrop, attn_pdrop
        self.num_digit_tokens = num_digit_tokens
        self.abacus_max_digits = abacus_max_digits
        self.abacus_max_offset = abacus_max_offset
        self.abacus_offset_per_sequence = abacus_offset_per_sequence
        self.abacus_offset_per_problem = abacus_offset_per_problem
        self.abacus_unshifted_fraction = abacus_unshifted_fraction
        self.abacus_offset_all_tokens = abacus_offset_all_tokens
        self.abacus_align_answer = abacus_align_answer
        self.answer_start_token_id = answer_start_token_id
        self.abacus_num_segments = abacus_num_segments
        self.abacus_offset_segments = abacus_offset_segments
        self.abacus_operand_rows = abacus_operand_rows
        self.abacus_line_positions = abacus_line_positions
        self.abacus_prompt_segments = abacus_prompt_segments
        self.abacus_offset_items = abacus_offset_items
        self.abacus_even_offsets = abacus_even_offsets
        self.abacus_attention_window = abacus_attention_window
        self.abacus_row_window = abacus_row_window
        self.abacus_line_window = abacus_line_window
        self.abacus_marked_labels = abacus_marked_labels
        self.abacus_line_end = abacus_line_end
        self.abacus_pair_roles = abacus_pair_roles
        self.abacus_relation_bias = abacus_relation_bias
        self.abacus_digit_places = abacus_digit_places
        self.abacus_line_behind = abacus_line_behind
        self.abacus_place_rows = abacus_place_rows
        self.abacus_window_layers = abacus_window_layers
        self.abacus_period = abacus_period
        self.absolute_position_embedding = absolute_position_embedding
        self.max_position_embeddings = max_position_embeddings
        self.num_future_tokens = num_future_tokens
        self.initializer_range = initializer_range
        super().__init__(**kwargs)  # ArithConfig: token ids, tied head, then self._validate()

    def _validate(self):
        """Reject malformed configs with one line that names the field, before torch sees them."""
        name = type(self).__name__
        self.check_integers(("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                             "intermediate_size", "num_digit_tokens", "abacus_max_digits", "max_position_embeddings",
                             "num_future_tokens"))
        self.check_integers(("abacus_max_offset", "abacus_num_segments", "abacus_attention_window", "abacus_period",
                             "abacus_window_layers", "abacus_marked_labels"), minimum=0)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"{name}.hidden_size ({self.hidden_size}) must be a multiple of "
                             f"num_attention_heads ({self.num_attention_heads})")
        if not 2 <= self.num_digit_tokens <= self.vocab_size:
            raise ValueError(f"{name}.num_digit_tokens must be between 2 and vocab_size, got {self.num_digit_tokens}")
        if self.abacus_align_answer and not (isinstance(self.answer_start_token_id, int)
                                             and 0 <= self.answer_start_token_id < self.vocab_size):
            raise ValueError(f"{name}.abacus_align_answer needs answer_start_token_id, the id of the token before "
                             f"the answer, in [0, vocab_size); got {self.answer_start_token_id!r}")
        if self.abacus_line_positions and not (isinstance(self.answer_start_token_id, int)
                                               and 0 <= self.answer_start_token_id < self.vocab_size
                                               and self.abacus_num_segments >= 2
                                               and not self.abacus_offset_per_problem):
            raise ValueError(f"{name}.abacus_line_positions needs answer_start_token_id (the `=` that joins the "
                             f"lines) in [0, vocab_size), abacus_num_segments >= 2 (the slots) and no "
                             f"abacus_offset_per_problem; got {self.answer_start_token_id!r}, "
                             f"{self.abacus_num_segments!r}, {self.abacus_offset_per_problem!r}")
        if self.abacus_prompt_segments and not self.abacus_line_positions:
            raise ValueError(f"{name}.abacus_prompt_segments applies with abacus_line_positions (without them every "
                             "token already has its separator count as its segment)")
        if self.abacus_offset_items and not self.abacus_prompt_segments:
            raise ValueError(f"{name}.abacus_offset_items moves prompt segments and line slots, so it needs "
                             "abacus_line_positions with abacus_prompt_segments")
        if self.abacus_offset_segments and not (isinstance(self.answer_start_token_id, int)
                                                and 0 <= self.answer_start_token_id < self.vocab_size
                                                and self.abacus_num_segments and not self.abacus_line_positions
                                                and not self.abacus_offset_per_problem):
            raise ValueError(f"{name}.abacus_offset_segments needs answer_start_token_id in [0, vocab_size) and "
                             "abacus_num_segments > 0, without abacus_line_positions or abacus_offset_per_problem")
        if self.abacus_operand_rows and not (isinstance(self.answer_start_token_id, int)
                                             and 0 <= self.answer_start_token_id < self.vocab_size
                                             and self.abacus_num_segments and not self.abacus_line_positions
                                             and not self.abacus_offset_segments
                                             and not self.abacus_offset_per_problem):
            raise ValueError(f"{name}.abacus_operand_rows needs answer_start_token_id in [0, vocab_size) and "
                             "abacus_num_segments > 0, without abacus_line_positions, abacus_offset_segments or "
                             "abacus_offset_per_problem")
        if self.abacus_row_window and not (self.abacus_operand_rows and self.abacus_align_answer
                                           and self.abacus_num_segments >= 3 and not self.abacus_attention_window):
            raise ValueError(f"{name}.abacus_row_window needs abacus_operand_rows, abacus_align_answer and "
                             f"abacus_num_segments >= 3, and no abacus_attention_window; got "
                             f"{self.abacus_operand_rows!r}, {self.abacus_align_answer!r}, "
                             f"{self.abacus_num_segments!r}, {self.abacus_attention_window!r}")
        if self.abacus_line_window and not (self.abacus_prompt_segments and not self.abacus_attention_window
                                            and not self.abacus_row_window):
            raise ValueError(f"{name}.abacus_line_window needs abacus_prompt_segments, and no abacus_attention_window "
                             f"or abacus_row_window; got {self.abacus_prompt_segments!r}, "
                             f"{self.abacus_attention_window!r}, {self.abacus_row_window!r}")
        if self.abacus_marked_labels and not (self.abacus_line_window and self.abacus_marked_labels < self.vocab_size):
            raise ValueError(f"{name}.abacus_marked_labels ({self.abacus_marked_labels}) applies with abacus_line_window, "
                             f"below vocab_size ({self.vocab_size})")
        if self.abacus_pair_roles not in (False, True, "every_line"):
            raise ValueError(f"{name}.abacus_pair_roles must be true, false or 'every_line', got {self.abacus_pair_roles!r}")
        for flag in ("abacus_line_end", "abacus_pair_roles", "abacus_relation_bias"):
            if getattr(self, flag) and not self.abacus_line_window:
                raise ValueError(f"{name}.{flag} applies with abacus_line_window")
        if self.abacus_relation_bias and not self.abacus_pair_roles:
            raise ValueError(f"{name}.abacus_relation_bias needs abacus_pair_roles (with no slot or line embedded, "
                             "the role is what tells a slot's pairing)")
        if not self.abacus_line_behind and not self.abacus_line_window:
            raise ValueError(f"{name}.abacus_line_behind: false applies with abacus_line_window")
        if self.abacus_digit_places not in (False, True, "narrow"):
            raise ValueError(f"{name}.abacus_digit_places must be true, false or 'narrow', got {self.abacus_digit_places!r}")
        if self.abacus_digit_places and not (self.abacus_relation_bias and self.abacus_pair_roles is True):
            raise ValueError(f"{name}.abacus_digit_places needs abacus_relation_bias and abacus_pair_roles: true (rounds "
                             f"per place); got {self.abacus_relation_bias!r}, {self.abacus_pair_roles!r}")
        if not self.abacus_place_rows and not self.abacus_digit_places:
            raise ValueError(f"{name}.abacus_place_rows: false applies with abacus_digit_places")
        windowed = self.abacus_attention_window or self.abacus_row_window or self.abacus_line_window
        if self.abacus_window_layers and not (windowed and self.abacus_window_layers <= self.num_hidden_layers):
            raise ValueError(f"{name}.abacus_window_layers ({self.abacus_window_layers}) needs abacus_attention_window, "
                             f"abacus_row_window or abacus_line_window, and at most num_hidden_layers "
                             f"({self.num_hidden_layers})")
        if self.abacus_even_offsets and self.abacus_max_offset < 2:
            raise ValueError(f"{name}.abacus_even_offsets needs abacus_max_offset >= 2 (even offsets below it are all 0), "
                             f"got {self.abacus_max_offset}")
        if self.abacus_offset_per_problem and not self.abacus_offset_per_sequence:
            raise ValueError(f"{name}.abacus_offset_per_problem needs abacus_offset_per_sequence (a draw per problem "
                             "is a draw per sequence, made for each problem)")
        if self.abacus_period and not (self.abacus_attention_window
                                       and 2 * self.abacus_attention_window + 1 < self.abacus_period
                                       <= self.abacus_max_digits):
            raise ValueError(f"{name}.abacus_period ({self.abacus_period}) needs an abacus_attention_window w > 0 "
                             f"with 2w + 1 < abacus_period <= abacus_max_digits; got w = {self.abacus_attention_window}, "
                             f"abacus_max_digits = {self.abacus_max_digits}")
        if not (isinstance(self.abacus_offset_segments, (int, float)) and 0.0 <= self.abacus_offset_segments <= 1.0):
            raise ValueError(f"{name}.abacus_offset_segments must lie in [0, 1], got {self.abacus_offset_segments!r}")
        for field in ("resid_pdrop", "embd_pdrop", "attn_pdrop", "abacus_unshifted_fraction"):
            if not 0.0 <= getattr(self, field) < 1.0:
                raise ValueError(f"{name}.{field} must lie in [0, 1), got {getattr(self, field)!r}")


__all__ = ["AbacusGPT2Config"]
