"""Forced merges: the first merges of a run given rather than chosen (extending a tokenizer, and
SuperBPE's second stage), turned into the pairs of token ids the merge loop makes.

The loop gives ids 0-255 to the bytes and 256 + k to the token of merge k, so the ids of the forced
merges, which come first, are known before the loop starts: merge k joins the ids of its two tokens'
bytes, each a byte or the token of an earlier forced merge. A token made twice (two merges giving
the same bytes) is named by the first merge that made it.
"""


def forced_pairs(forced, shift: int) -> list[int]:
    """The pair of each forced merge as the loop names pairs, `left << shift | right`; ValueError
    naming the first merge that is not a pair of non-empty bytes or uses a token no earlier merge
    makes."""
    token_id = {bytes([i]): i for i in range(256)}
    pairs = []
    for k, merge in enumerate(forced):
        if not (isinstance(merge, tuple) and len(merge) == 2 and all(type(t) is bytes and t for t in merge)):
            raise ValueError(f"forced merge {k + 1} is {merge!r}; each must be a pair of non-empty bytes")
        left, right = merge
        for token in merge:
            if token not in token_id:
                raise ValueError(
                    f"merge {k + 1} ({left!r}, {right!r}) uses the token {token!r}, which no earlier merge makes; "
                    "merges must come in rank order, each made of bytes and earlier merges' tokens"
                )
        pairs.append(token_id[left] << shift | token_id[right])
        token_id.setdefault(left + right, 256 + k)
    return pairs
