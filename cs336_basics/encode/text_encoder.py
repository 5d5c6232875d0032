"""In-memory encoding of one text, the engine behind `Tokenizer.encode` and `encode_packed`.

A `TextEncoder` is built once per tokenizer. It matches special tokens (or, under a Hugging Face
pipeline, added tokens, see `text.added_tokens`), cuts the text between them into chunks or
pre-tokens, and hands them to the tokenizer's `EncodeCache`, which knows the special tokens' ids,
some `CHUNKS_PER_CALL` at a time; with BPE-dropout, to a `dropout.DropoutEncoder` instead, which
keeps no random ids.
"""

from cs336_basics.encode.dropout import DropoutEncoder, Stream
from cs336_basics.encode.encoder import EncodeCache
from cs336_basics.text.added_tokens import AddedTokens
from cs336_basics.text.patterns import Pretokenizer
from cs336_basics.text.pretokenize import special_token_regex

# The cache gets at most this many chunks at a time: few enough that the chunks, just made, and
# their ids stay in the processor's cache from lookup to join (8 Ki measured faster than 64 Ki on
# warm and on 2-worker encoding).
CHUNKS_PER_CALL = 1 << 13


def whole_tokens(vocab: dict[int, bytes], codec: str) -> dict[str, bytes]:
    """The vocabulary's tokens that are text (a pre-token is), with their ids packed with `codec`:
    what a pipeline with `ignore_merges` takes whole (see `EncodeCache`)."""
    whole = {}
    for token_id, token in vocab.items():
        try:
            whole[token.decode("utf-8")] = chr(token_id).encode(codec, "surrogatepass")
        except UnicodeDecodeError:
            pass
    return whole


class TextEncoder:
    """Text (holding no surrogates) to packed ids, through `cache`.

    `added` is the added-token matching of a pipeline that needs it (not `AddedTokens.plain`), else
    None: special tokens are then matched on the raw text in one round.
    """

    def __init__(self, pretokenizer: Pretokenizer, cache: EncodeCache, special_tokens: list[str],
                 added: AddedTokens | None):
        self._cache = cache
        self._added = added
        self._special_re = special_token_regex(special_tokens, keep=True)
        self._split = pretokenizer.chunks if pretokenizer.boundary else pretokenizer.pretokens
        if pretokenizer.pipeline is not None and not pretokenizer.boundary:
            self._split = pretokenizer.pipeline.pretokens  # of text already normalized
        # The cache's keys to pre-tokens, for BPE-dropout (built when first used).
        self._key_pretokens = pretokenizer.chunk_pretokens if pretokenizer.boundary else None
        self._dropout: DropoutEncoder | None = None

    def encode_packed(self, text: str, dropout: float = 0.0, stream: Stream | None = None) -> bytes:
        """The ids of text that holds no surrogates, packed as `id_packing` says. The chunks of its
        documents and its special tokens go to the cache together, `CHUNKS_PER_CALL` at a time;
        with `dropout` above 0, to BPE-dropout drawing from `stream` (see `dropout`)."""
        encode = self._cache.encode
        if dropout:
            if self._dropout is None:
                self._dropout = DropoutEncoder(*self._cache.plain_parts(), self._key_pretokens)
            dropout_encoder = self._dropout

            def encode(chunks: list[str]) -> bytes:
                return dropout_encoder.encode(chunks, dropout, stream)

        if self._added is not None:
            return self._encode_chunks(self._added.keys(text, self._split), encode)
        if self._special_re is None:
            return self._encode_chunks(self._split(text), encode)
        out: list[bytes] = []
        chunks: list[str] = []
        split = self._split
        for i, part in enumerate(self._special_re.split(text)):
            if i % 2:
                chunks.append(part)
            elif part:
                chunks += split(part)
                if len(chunks) >= CHUNKS_PER_CALL:
                    out.append(self._encode_chunks(chunks, encode))
                    chunks = []
        out.append(encode(chunks))
        return b"".join(out)

    @staticmethod
    def _encode_chunks(chunks: list[str], encode) -> bytes:
        """The packed ids of chunks, handed to `encode` (the cache's) `CHUNKS_PER_CALL` at a time."""
        if len(chunks) <= CHUNKS_PER_CALL:
            return encode(chunks)
        return b"".join([encode(chunks[i : i + CHUNKS_PER_CALL]) for i in range(0, len(chunks), CHUNKS_PER_CALL)])
