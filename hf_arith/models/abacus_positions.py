"""Abacus position ids (McLeish et al. 2024, arXiv 2405.17399), shared by every abacus family.

Each digit gets its index within its own number, counting from 1 at the first digit written
(the least significant one in reversed formats); every other token gets 0. Digit `i` of every
operand and of the answer then shares one position embedding, which is what lets a model line
digits up at lengths it never saw, provided those indices were trained: hence the random
training offset. Shipped as Hub remote code: imports only torch.
"""

from __future__ import annotations

import torch


def abacus_position_ids(input_ids: torch.Tensor, num_digit_tokens: int,
                        answer_start_token_id: int | None = None) -> torch.Tensor:
    """Per-digit positions for a batch of token ids [batch, length] (digit tokens are ids < num_digit_tokens).

    With `answer_start_token_id` (the `=` before the answer), the answer is aligned with what it
    predicts: `=` gets 1 and answer digit i gets i + 1, the index of the digit it predicts next.
    The token that predicts answer digit i then carries the same index as operand digit i, so
    finding the operands is an equality of indices, which holds at every length, instead of a
    "next index" relation that must be learned for each index separately.
    """
    is_digit = input_ids < num_digit_tokens  # the tokenizer puts digits first: id == digit value
    index = torch.arange(input_ids.shape[-1], device=input_ids.device).expand_as(input_ids)
    # Index of the latest non-digit token at or before each position (-1 before the first one).
    last_break = torch.where(is_digit, torch.full_like(index, -1), index).cummax(dim=-1).values
    positions = torch.where(is_digit, index - last_break, torch.zeros_like(index))
    if answer_start_token_id is None:
        return positions
    is_start = input_ids == answer_start_token_id
    # The answer: the `=` and the digit run right after it (its run starts at the `=`).
    in_answer = is_start | (is_digit & (last_break >= 0)
                            & is_start.gather(-1, last_break.clamp(min=0)))
    return torch.where(in_answer, positions + 1, positions)


def line_positions(input_ids: torch.Tensor, line_token_id: int, num_digit_tokens: int,
                   index: torch.Tensor, pairs: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(index, slot) for answers written as lines joined by `line_token_id` (the `=` that also ends the prompt).

    After the prompt's `=`, every token gets its slot in its line: 0 for the `=` that opens the
    line, then 1, 2, ...; and every non-digit token gets its line's number (1 for the first) as its
    index, where it had 0. Digits keep their digit index; prompt tokens keep `index` and slot 0.
    Why: a sort scratchpad line p is the labels ordered by digit place p + 1 (abacus index p + 1),
    ties in the order of line p - 1. Without these ids a label's line and its place in that line
    can only be inferred by counting over the whole sequence, which grows less exact with it; with
    them, the digit to look up is an equality of indices, and the order of the line before is a slot.

    With `pairs` (lines of label-digit pairs, the line window's transposition_keys), a digit shares its
    label's slot and every answer token, digits included, takes its line's number as its index.
    """
    is_line = input_ids == line_token_id
    line = is_line.long().cumsum(-1)  # the `=`s at or before each token: the prompt's `=` opens line 1
    pos = torch.arange(input_ids.shape[-1], device=input_ids.device).expand_as(input_ids)
    opened = torch.where(is_line, pos, torch.full_like(pos, -1)).cummax(dim=-1).values
    in_answer = line > 0
    if pairs:  # the non-digit tokens since the line's `=`: a label and the digit after it count once
        counted = (input_ids >= num_digit_tokens).long().cumsum(-1)
        slot = torch.where(in_answer, counted - counted.gather(-1, opened.clamp(min=0)), torch.zeros_like(pos))
        return torch.where(in_answer, line, index), slot
    slot = torch.where(in_answer, pos - opened, torch.zeros_like(pos))
    index = torch.where(in_answer & (input_ids >= num_digit_tokens), line, index)
    return index, slot


def problem_ids(input_ids: torch.Tensor, end_token_id: int) -> torch.Tensor:
    """Which problem of a packed sequence each token belongs to: the `end_token_id`s (<eos>) before it.

    An <eos> closes its own problem, so it gets the same id as the tokens before it.
    """
    is_end = (input_ids == end_token_id).long()
    return is_end.cumsum(-1) - is_end


def segment_ids(input_ids: torch.Tensor, num_digit_tokens: int, pad_token_id: int | None,
                num_segments: int, end_token_id: int | None = None) -> torch.Tensor:
    """Which number each token belongs to: the separators (non-digit, non-pad tokens) up to and including it.

    `a+b=c` gives a: 0, `+` and b: 1, `=` and c: 2, capped at num_segments - 1. Without it a
    NoPE model tells the operands and the answer apart by attending over the separators seen so
    far, a feature that changes with the sequence length and so breaks on longer numbers.
    With `end_token_id`, the count restarts after each such token (<eos>), so each problem of a
    packed sequence numbers its own operands from 0.
    """
    separator = input_ids >= num_digit_tokens
    if pad_token_id is not None:
        separator &= input_ids != pad_token_id
    count = separator.long().cumsum(-1)
    if end_token_id is not None:
        index = torch.arange(input_ids.shape[-1], device=input_ids.device).expand_as(input_ids)
        # The count at the latest <eos> strictly before each token (0 before the first one).
        last_end = torch.where(input_ids == end_token_id, index, torch.full_like(index, -1)).cummax(dim=-1).values
        before = torch.cat([torch.full_like(last_end[..., :1], -1), last_end[..., :-1]], dim=-1)
        count = count - torch.where(before >= 0, count.gather(-1, before.clamp(min=0)), torch.zeros_like(count))
    return count.clamp(max=num_segments - 1)


def offset_answer_segments(input_ids: torch.Tensor, segment: torch.Tensor, offset: torch.Tensor,
                           answer_start_token_id: int, num_segments: int, share: float = 1.0) -> torch.Tensor:
    """Add each row's training offset to the segments of its answer (the tokens from the first
    `answer_start_token_id` on) in a random `share` of the rows, capped at num_segments - 1.

    `offset` is the shift `random_offsets` gave each token ([batch, length]; one k per row, 0 where
    a token was not moved): a row's k is its largest shift. Why: where an answer line's segment is
    what picks the operand digit it works on (long multiplication's line j, digit j of b), segment
    and index then move together, so the pairs past the trained lengths are trained as well.
    """
    k = offset.amax(dim=-1, keepdim=True)
    if share < 1.0:
        k = torch.where(torch.rand(k.shape, device=k.device) < share, k, torch.zeros_like(k))
    in_answer = (input_ids == answer_start_token_id).long().cumsum(-1) > 0
    return torch.where(in_answer, segment + k, segment).clamp(max=num_segments - 1)


def offset_item_segments(input_ids: torch.Tensor, segment: torch.Tensor, answer_start_token_id: int,
                         num_segments: int, pad_token_id: int | None, even: bool = False,
                         together: bool = False) -> torch.Tensor:
    """Move a row's prompt segments (which item a token belongs to) by one random k and its answer
    slots (a token's place in its line) by another, each uniform over what fits below num_segments;
    segment 0 (no item, a line's `=`) and padding stay. Segments as `line_positions` with prompt
    segments give them.

    Why: a list of at most 5 items only ever fills the first 15 prompt segments and slots 1-5; moved,
    the segments and slots of a list of 20 items are trained while every relation within a list
    (an item's label to its digits, a slot to the next) keeps its distance. With `even`, each k is
    rounded down to even, so every segment and slot keeps its parity. With `together`, the prompt and the
    answer share one k, so prompt item j and slot j stay one id (the line window's items and slots).
    """
    in_prompt = (input_ids == answer_start_token_id).long().cumsum(-1) == 0
    real = segment > 0
    if pad_token_id is not None:
        real &= input_ids != pad_token_id
    moved = torch.zeros_like(segment)
    for part in ((torch.ones_like(in_prompt),) if together else (in_prompt, ~in_prompt)):
        top = torch.where(part & real, segment, torch.zeros_like(segment)).amax(dim=-1, keepdim=True)
        room = (num_segments - 1 - top).clamp(min=0)
        k = (torch.rand(room.shape, device=segment.device) * (room + 1)).floor().long().clamp(max=room)
        if even:
            k = k - k % 2
        moved = torch.where(part & real, k, moved)
    return segment + moved


def item_starts(item: torch.Tensor) -> torch.Tensor:
    """Which tokens open their item (a sort item's label): an item id > 0 that the token before does not have."""
    before = torch.cat([torch.zeros_like(item[:, :1]), item[:, :-1]], dim=-1)
    return (item > 0) & (item != before)


def label_items(input_ids: torch.Tensor, item: torch.Tensor, in_prompt: torch.Tensor, vocab_size: int,
                num_digit_tokens: int, marked_shift: int = 0) -> torch.Tensor:
    """Which prompt item each token names: a prompt token its own `item`; an answer label the item whose
    label (its item's first token) has the same id, or for a marked label (`marked_shift` > 0: ids that
    many above the plain ones) its id less the shift; an answer digit the item of the label before it
    (a label-digit pair); any other token 0.

    Why: under the line window, an answer label finds its item's digits by this id, whatever the list's
    length, where a learned match over the prompt spreads over more keys as the list grows.
    """
    label = in_prompt & item_starts(item)
    table = torch.zeros(input_ids.shape[0], vocab_size, dtype=item.dtype, device=item.device)
    table.scatter_reduce_(1, torch.where(label, input_ids, 0), torch.where(label, item, 0), reduce="amax")
    named = table.gather(1, input_ids.clamp(0, vocab_size - 1))
    if marked_shift:
        named = torch.maximum(named, table.gather(1, (input_ids - marked_shift).clamp(0, vocab_size - 1)))
    before_named = torch.cat([torch.zeros_like(named[:, :1]), named[:, :-1]], dim=-1)
    named = torch.where(input_ids < num_digit_tokens, before_named, named)
    return torch.where(in_prompt, item, named)


def closed_slots(input_ids: torch.Tensor, line_token_id: int, segment: torch.Tensor) -> torch.Tensor:
    """For each `line_token_id` (the `=` that ends a line and opens the next): the slot after the line it
    ends, one past the slot of the token before it (the prompt's `=`: one past the last item), from
    line-window segments (prompt tokens: their item; answer tokens: their slot); any other token 0.

    Why: under the line window this `=` is the line before's end, seen by the token whose next slot it
    takes, so a round ends where the round before ended by a key that is there, not by one that is missing.
    """
    before = torch.cat([torch.zeros_like(segment[:, :1]), segment[:, :-1]], dim=-1)
    return torch.where(input_ids == line_token_id, before + 1, torch.zeros_like(segment))


def pair_roles(line: torch.Tensor, slot: torch.Tensor, in_prompt: torch.Tensor, per_place: bool = True,
               place_ends: bool = False) -> torch.Tensor:
    """Each answer token's role in its round of an odd-even transposition sort: 1 + the parity of its slot
    plus its round, where line L (1 for the first) is round (L - 1) mod the list's items (`per_place`: the
    rounds restart at each digit place, as transposition_marked and _keys write them) or round L - 1 (the
    rounds alternate over every line, as transposition_flags writes them); with `place_ends` (per place),
    + 2 in a place's first round and + 4 in the list's last line (L at least the longest item's digits
    times the items, so a line past it, which a model may write before it fails, stays in the table); a
    prompt token 0. `line` and `slot` as `line_positions` gives them (unshifted: a
    prompt digit's index, an answer token's line) and prompt tokens' slots their items, so the list's
    items are the prompt's largest.

    Why: round r pairs the slots of r's parity with their right neighbour, so this role says which
    neighbour a slot is compared with, the same at every slot of every list, where the line's marker
    (one slot further each round) is out of a far slot's window. A place's first round marks slot 1 after
    a round that marked the last slot, out of slot 1's window; and the last line is where a list ends
    (`<eos>`), which a round that sees only its neighbours cannot tell from the end of any other place.
    """
    round_ = (line - 1).clamp(min=0)
    items = torch.where(in_prompt, slot, torch.zeros_like(slot)).amax(dim=-1, keepdim=True).clamp(min=1)
    if per_place:
        round_ = round_ % items
    role = 1 + (slot + round_) % 2
    if place_ends:
        longest = torch.where(in_prompt, line, torch.zeros_like(line)).amax(dim=-1, keepdim=True)
        last = line >= longest * items  # lines a model writes past the list's last are last lines too
        role = role + 2 * ((round_ == 0) & ~last).long() + 4 * last.long()
    return torch.where(in_prompt, torch.zeros_like(slot), role)


def pair_role_codes(place_ends: bool) -> int:
    """How many role ids `pair_roles` gives: 0 and 1 + parity, with `place_ends` + 2 and + 4 on those."""
    return 7 if place_ends else 3


def pack_roles(role: torch.Tensor, items: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Roles (`pair_roles`) and line-window items as one id, which `pack_rows` packs as the row
    (an item, or the slot an `=` closes, is at most num_segments)."""
    return role * (num_segments + 1) + items


def unpack_roles(packed: torch.Tensor, num_segments: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(role, items) of ids made by `pack_roles`."""
    return packed // (num_segments + 1), packed % (num_segments + 1)


def after_prompt(index: torch.Tensor, segment: torch.Tensor) -> torch.Tensor:
    """Which tokens are answer tokens, from unshifted line-window ids: the `=` that ends the prompt is the
    first token with slot 0 and an index (line 1), and every prompt token has an item (segment > 0)."""
    return ((segment == 0) & (index > 0)).long().cummax(dim=-1).values.bool()


# Relation codes of `line_window_relations`: 0 unseen; a seen key 1 + its slot offset in the line before
# (0: not there, 1-4: q - 1 .. q + 2) + 5 if it is the query's own slot (or, for a prompt query, item)
# + 10 if it is the prompt item the query's label names + 20 if it is the `=` that ends the line before
# (41 codes), and with `places` + 40 if it is a prompt digit at the place the query's line writes (81).
LINE_WINDOW_RELATIONS = 41
AT_PLACE = 40


def line_window_codes(places: bool) -> int:
    """How many relation codes `line_window_relations` gives, with or without `places`."""
    return LINE_WINDOW_RELATIONS + places * AT_PLACE


def answer_lines(segment: torch.Tensor, is_answer: torch.Tensor) -> torch.Tensor:
    """Each token's line (1 for the first answer line), counted from the `=`s that open lines: the answer
    tokens of slot 0 that follow a token with a slot or item (a digit written right after an `=`, malformed,
    shares its slot 0 and opens nothing); prompt tokens 0. Segments as `line_positions` gives them.

    Why: counted, a line number has no table to fit, so a list may take more lines than any number has digits."""
    before = torch.cat([torch.ones_like(segment[:, :1]), segment[:, :-1]], dim=-1)
    return (is_answer & (segment == 0) & (before > 0)).long().cumsum(-1)


def line_window_relations(query: tuple, key: tuple, line_end: bool = False, places: bool | str = False,
                          behind: bool = True) -> torch.Tensor:
    """What each token may see in a sort written as lines of labels (transposition rounds) under the
    line window, and as what: int [batch, queries, keys], 0 where unseen, else a relation code
    (`line_window_codes`). Causality and padding are applied elsewhere.

    `query` and `key` are (index, item, segment, is_answer) of the unshifted ids, the queries the keys'
    last tokens: an answer token's segment is its slot q (0 for the `=` that opens the line; its line L
    is counted, `answer_lines`) and its item the prompt item its label names (`label_items`; with
    `line_end`, an `=`: the slot it closes); a prompt token's segment and item are its item j, a prompt
    digit's index its place + 1 (operands written lowest digit first). The token at slot q predicts slot
    q + 1, which a round fills from slot q + 1 of the line before or its neighbour; the token's own label
    came from slot q or its neighbour. So it sees slots q - 1 to q + 2 of the line before (line 1: the
    prompt's items q - 1 to q + 2, the list as given), itself, the prompt item its label names, where it
    finds that item's digits, and with `line_end`, where the line before ends at slot q + 1, the `=`
    that ends it (its own line's first token). With `places`, a prompt digit it sees at the place its
    line writes (line L of a list of n items: L // n, transposition_next_keys) has a code of its own, so
    the digit to write is one relation at every place; with `places` "narrow", those digits and the items'
    labels are all an answer token sees of the prompt, so it sees as many keys in a list of 20-digit numbers
    as in one of 1-digit numbers. Without `behind`, slot q - 1 of the line before is not seen: slot q + 1
    never comes from there, and a larger digit that has just moved from it into slot q would otherwise be
    in view twice while the token compares slots q + 1 and q + 2. A prompt token sees its own item. Each
    key set, and each key's code, is the same in a list of 20 items as in one of 5.
    """
    (_, q_item, q_segment, q_answer), (k_index, k_item, k_segment, k_answer) = query, key
    k_lines = answer_lines(k_segment, k_answer)
    q_lines = k_lines[:, -q_segment.shape[1]:]
    q_line, k_line = q_lines[:, :, None], k_lines[:, None, :]
    slots_up = k_segment[:, None, :] - q_segment[:, :, None]
    prompt = ~k_answer[:, None, :]
    line_before = (k_line == q_line - 1) & (slots_up >= (-1 if behind else 0)) & (slots_up <= 2)  # line 1: the prompt's items
    itself = ~prompt & (k_line == q_line) & (slots_up == 0)
    named = prompt & (k_item[:, None, :] == q_item[:, :, None]) & (q_segment > 0)[:, :, None]
    ends = torch.zeros_like(itself)
    if line_end:
        ends = ~prompt & (k_line == q_line) & (k_segment == 0)[:, None, :] & (k_item[:, None, :] == q_segment[:, :, None] + 1)
    code = torch.where(line_before, slots_up + 2, 0) + 5 * itself.long() + 10 * named.long() + 20 * ends.long()
    if places:
        items = torch.where(k_answer, 0, k_segment).amax(dim=-1, keepdim=True).clamp(min=1)
        place = (q_lines // items)[:, :, None]
        at_place = prompt & (k_index > 0)[:, None, :] & (k_index[:, None, :] - 1 == place)
        code = code + AT_PLACE * at_place.long()
        if places == "narrow":  # of the prompt: those digits and each item's first token, its label
            kept = ~prompt | at_place | (prompt & item_starts(k_segment)[:, None, :])
            line_before, named = line_before & kept, named & kept
    seen = line_before | itself | named | ends
    answer_code = torch.where(seen, code + 1, 0)
    prompt_code = torch.where(prompt & (slots_up == 0), 6, 0)  # a prompt token's own item: "itself"
    return torch.where(q_answer[:, :, None], answer_code, prompt_code)


def line_window_allowed(query: tuple, key: tuple, line_end: bool = False) -> torch.Tensor:
    """The keys `line_window_relations` lets each query see: bool [batch, queries, keys]."""
    return line_window_relations(query, key, line_end) > 0


def operand_line_rows(input_ids: torch.Tensor, answer_start_token_id: int, num_digit_tokens: int,
                      pad_token_id: int | None) -> torch.Tensor:
    """Row of each token: digit j of the prompt's last number (j = 1 at its first written digit) and
    answer line j (the `=` that opens it and every token up to the next `=`) share row j; every
    other prompt token gets 0.

    Why: long multiplication's line j works on digit j of b. With segments alone, finding that
    digit is a learned match between line j's segment and b's index j, trained only for the lines
    of the trained lengths; with one shared row it is an equality of rows, and the row embedding
    gets a training offset of its own (independent of the digit index's), so every row is trained
    and no row is tied to an index.
    """
    line = (input_ids == answer_start_token_id).long().cumsum(-1)  # 0 in the prompt, 1 from its `=` on
    in_prompt = line == 0
    separator = in_prompt & (input_ids >= num_digit_tokens)
    if pad_token_id is not None:
        separator &= input_ids != pad_token_id
    seen = separator.long().cumsum(-1)
    in_last = in_prompt & (input_ids < num_digit_tokens) & (seen == seen.amax(dim=-1, keepdim=True))
    return torch.where(in_last, abacus_position_ids(input_ids, num_digit_tokens), line)


def b_digits(input_ids: torch.Tensor, rows: torch.Tensor, answer_start_token_id: int) -> torch.Tensor:
    """Which tokens are digits of the prompt's last number (b): the prompt tokens with a row (`operand_line_rows`)."""
    return (rows > 0) & ((input_ids == answer_start_token_id).long().cumsum(-1) == 0)


def pack_rows(row: torch.Tensor, segment: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Rows (`operand_line_rows`) and segments as one id, which `pack_positions` packs as the segment."""
    return row * num_segments + segment


def unpack_rows(packed: torch.Tensor, num_segments: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, segment) of ids made by `pack_rows`."""
    return packed // num_segments, packed % num_segments


def pack_positions(index: torch.Tensor, segment: torch.Tensor | None, max_digits: int) -> torch.Tensor:
    """One id tensor per token that carries both the digit index and the segment, so generate()'s
    and the decoder's slicing of `position_ids` to the uncached tokens moves both together."""
    return index if segment is None else segment * (max_digits + 1) + index


def unpack_positions(position_ids: torch.Tensor, max_digits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(digit index, segment) of ids made by `pack_positions`."""
    return position_ids % (max_digits + 1), position_ids // (max_digits + 1)


def check_abacus_range(position_ids: torch.Tensor, max_digits: int) -> None:
    """One clear error for a number longer than the position table, instead of an index error in torch."""
    longest = int(position_ids.max()) if position_ids.numel() else 0
    if longest > max_digits:
        raise ValueError(
            f"a number of {longest} digits is longer than this model's abacus range of {max_digits} digits "
            "(config.abacus_max_digits)"
        )


def table_rows(index: torch.Tensor, period: int) -> torch.Tensor:
    """The abacus table's row of each index: the index itself, or with a `period` 1 + (index - 1) mod
    period (row 0 stays the row of tokens with no place). Rows then repeat along a long number; an
    attention window keeps any two indices one query sees apart."""
    if not period:
        return index
    return torch.where(index > 0, (index - 1) % period + 1, index)


def window_allowed(query_index: torch.Tensor, key_index: torch.Tensor, window: int) -> torch.Tensor:
    """Which keys each query may see under an abacus attention window: bool [batch, queries, keys].

    Indices are the unshifted abacus ids (0: a token with no place). A placed query sees placed keys
    at most `window` indices away and every unplaced key; an unplaced query sees unplaced keys
    only. Neither set grows with the operands' length. Causality and padding are applied elsewhere.
    """
    q, k = query_index[:, :, None], key_index[:, None, :]
    unplaced_key = k == 0
    return torch.where(q > 0, unplaced_key | ((q - k).abs() <= window), unplaced_key)


def row_window_allowed(query: tuple, key: tuple) -> torch.Tensor:
    """What each token may see in long multiplication written as shifted sums, with operand rows:
    bool [batch, queries, keys]. Causality and padding are applied elsewhere.

    `query` and `key` are (index, row, segment) of the unshifted ids (`operand_line_rows` rows;
    segments 0: a, 1: `*` and b, 2: the answer; b's digits carry index 0, the answer is aligned).
    The token at index i of line j predicts that line's digit i: (a_i * b_j + P_(i+1) + carry) mod
    10, with P the line before. So it sees b_j and b_(j+1) by row (the next line's digit says
    whether another line follows), a's digits i - 1 and i, the line before at indices i + 1 and
    i + 2, its own line at i - 1 and i (the carry into digit i follows from digit i - 1 as written),
    and the unplaced prompt tokens. A prompt token sees itself and the unplaced prompt tokens.
    Each key set is the same in the middle of a long line as in a short one, so no token can tell a
    line's length or count the lines before it: what trains on 5 digits applies to 10.
    """
    (q_index, q_row, q_segment), (k_index, k_row, k_segment) = query, key
    up = k_index[:, None, :] - q_index[:, :, None]  # key index minus query index
    rows_up = k_row[:, None, :] - q_row[:, :, None]
    unplaced = (k_index == 0)[:, None, :] & (k_segment < 2)[:, None, :]
    b_key = ((k_segment == 1) & (k_row > 0))[:, None, :]
    answer_key = (k_segment >= 2)[:, None, :]
    own_line = (rows_up == 0) & (up >= -1) & (up <= 0)
    line_before = (rows_up == -1) & (up >= 1) & (up <= 2)
    seen = torch.where(b_key, (rows_up == 0) | (rows_up == 1),
                       torch.where(answer_key, own_line | line_before, unplaced | ((up >= -1) & (up <= 0))))
    itself = (up == 0) & (rows_up == 0) & ~answer_key
    return torch.where((q_segment >= 2)[:, :, None], seen, (unplaced & ~b_key) | itself)


def random_offsets(position_ids: torch.Tensor, max_offset: int, max_digits: int, per_sequence: bool,
                   unshifted_fraction: float = 0.0, shift_all_tokens: bool = False,
                   problem: torch.Tensor | None = None, even: bool = False) -> torch.Tensor:
    """Shift every digit position by a random k in [0, max_offset] (one k per batch or per sequence).

    Without the shift, indices beyond the training length never receive gradient and length
    generalization fails. k is capped so that no shifted index leaves the table. With uniform k,
    index 1 (used by every number at test time, where k = 0) is trained only when k = 0; a share
    `unshifted_fraction` of draws keeps k = 0 so the low indices are trained as often as the rest.
    With `shift_all_tokens`, non-digit tokens move to k too: the `=` that predicts the first answer
    digit then sits one index below it for every k, as each answer digit sits below the next.
    With `problem` (`problem_ids` of a packed sequence), each problem draws its own k, so digits
    whose indices lie far apart meet in one sequence (one problem of short operands never gives that).
    With `even`, k is rounded down to even, so every index keeps its parity.
    """
    if max_offset <= 0 or position_ids.numel() == 0:
        return position_ids
    longest = position_ids.max(dim=-1).values  # [batch]
    room = (max_digits - longest).clamp(min=0, max=max_offset)
    if not per_sequence:  # the paper's choice: one k for the whole batch
        room = room.min().expand_as(room)
        draw = torch.rand((), device=position_ids.device).expand_as(room)
    else:
        if problem is not None:  # one draw per (sequence, problem)
            room = room[:, None].expand(-1, int(problem.max()) + 1)
        draw = torch.rand(room.shape, device=position_ids.device)
    k = (draw * (room + 1)).floor().long().clamp(max=room)
    if even:
        k = k - k % 2
    if unshifted_fraction > 0:
        keep = torch.rand(k.shape if per_sequence else (), device=k.device) < unshifted_fraction
        k = torch.where(keep, torch.zeros_like(k), k)
    k = k.gather(1, problem) if problem is not None and per_sequence else k[:, None]
    if shift_all_tokens:
        return position_ids + k
    return torch.where(position_ids > 0, position_ids + k, position_ids)


__all__ = ["AT_PLACE", "LINE_WINDOW_RELATIONS", "abacus_position_ids", "after_prompt", "answer_lines", "b_digits",
           "check_abacus_range", "closed_slots", "item_starts", "label_items", "line_positions",
           "line_window_allowed", "line_window_codes", "line_window_relations", "offset_answer_segments",
           "offset_item_segments", "operand_line_rows", "pack_positions", "pack_rows", "pair_role_codes",
           "problem_ids", "random_offsets", "row_window_allowed", "segment_ids", "unpack_positions", "unpack_rows",
           "window_allowed"]
