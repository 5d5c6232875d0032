"""What a tokenizer learned and how well it compresses text. This is the public API of the report;
`bpe stats`, `bpe vocab`, `bpe report` and `bpe serve` use these names.

    measures    how a tokenizer cuts text: `TextStats` (bytes and characters per token, kinds of
                tokens, fertility, Rényi and Shannon efficiency, vocabulary use), `stats_table`, and
                the compression figure with the text it was measured on (`on_text`, `size_label`)
    vocabulary  each token with the merge behind it and why it would be under-trained:
                `vocab_entries`, `token_entry`, `under_trained`, `vocab_tsv_lines`
    loading     what a report measures besides the tokenizer: held-out text (`read_sample`),
                pretrained tokenizers (`load_pretrained`), the tokenizer cut to fewer merges (`truncated`)
    page        the report page, one self-contained HTML file (`build_report`), made of the
                `sections` and the `plots`
    files       the pages' HTML, CSS and JavaScript, package data read by `page_file`
"""

from cs336_basics.report.files import page_file
from cs336_basics.report.loading import OFFLINE, PRETRAINED, HeldOut, load_pretrained, read_sample, truncated
from cs336_basics.report.measures import (
    KINDS,
    RENYI_ALPHA,
    TextStats,
    classify_token,
    efficiency,
    measure_rows,
    on_text,
    size_label,
    stats_table,
    tokens_for_share,
    tokens_per_word,
)
from cs336_basics.report.page import build_report
from cs336_basics.report.sections import sample_of
from cs336_basics.report.vocabulary import (
    FLAGS,
    MIN_SHARE,
    VocabEntry,
    check_merge_log,
    default_min_count,
    merge_ranks,
    token_entry,
    under_trained,
    vocab_entries,
    vocab_tsv_lines,
)

__all__ = [
    # measures
    "KINDS",
    "RENYI_ALPHA",
    "TextStats",
    "classify_token",
    "efficiency",
    "measure_rows",
    "on_text",
    "size_label",
    "stats_table",
    "tokens_for_share",
    "tokens_per_word",
    # vocabulary
    "FLAGS",
    "MIN_SHARE",
    "VocabEntry",
    "check_merge_log",
    "default_min_count",
    "merge_ranks",
    "token_entry",
    "under_trained",
    "vocab_entries",
    "vocab_tsv_lines",
    # loading
    "OFFLINE",
    "PRETRAINED",
    "HeldOut",
    "load_pretrained",
    "read_sample",
    "truncated",
    # the page
    "build_report",
    "sample_of",
    "page_file",
]
