"""Training: counting pre-tokens of a corpus in parallel (`counting`), the merge loop (`merge`, open
it first), the two run together behind `bpe.train_bpe` (`trainer`), the merge log (`merge_log`),
the C allocator's settings that keep memory flat (`allocator`), and the reference trainer that
defines what they compute (`reference`, the plain loop every fast path is tested against). Imports
`text` and `corpora`."""
