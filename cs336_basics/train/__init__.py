"""Training: counting pre-tokens of a corpus in parallel (`counting`), the merge loop (`merge`, open
it first), the two run together behind `bpe.train_bpe` (`trainer`), the merge log (`merge_log`),
and the C allocator's settings that keep memory flat (`allocator`). Imports `text` and `corpora`."""
