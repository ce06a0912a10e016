"""64-bit hashes of text and numbers, bit for bit those of ``pandas.util.hash_array``, without pandas.

A prompt's hash is public output (``prompt_hash`` in the prompts table) and the live tracker must
hash a prompt exactly as the log reader does, so every site hashes through this module.  The
values are pandas's (the hashes gsd has always written), computed with numpy:

* text: SipHash-2-4 of the UTF-8 bytes under the key ``b"0123456789123456"``, then the
  SplitMix64 finaliser below;
* a number: its 64 bits (a float's NaN and −0.0 made canonical first), then the finaliser;
* rows of several columns: CPython's tuple-hash combination of the columns' hashes
  (``pandas.util.hash_pandas_object`` of a frame, ``index=False``).

The finaliser: ``x ^= x >> 30; x *= 0xBF58476D1CE4E5B9; x ^= x >> 27; x *= 0x94D049BB133111EB;
x ^= x >> 31`` (all modulo 2^64).  Each text is hashed once however often it occurs; the work is
vectorised over the texts, one SipHash block of every text at a time.
"""

from __future__ import annotations

import numpy as np

__all__ = ["hash_text", "hash_numbers", "combine_hashes"]

_KEY = b"0123456789123456"  # pandas's default hash_key
_U64 = np.uint64
# Texts hashed together: bounds the memory of the block table (bytes of text per batch).
_BATCH_BYTES = 1 << 22


def _rotl(x, r: int) -> None:
    """x ← x rotated left by r bits, in place."""
    high = x >> _U64(64 - r)
    x <<= _U64(r)
    x |= high


def _sip_rounds(v0, v1, v2, v3, rounds: int) -> None:
    """SipHash's rounds, in place on the four state arrays."""
    for _ in range(rounds):
        v0 += v1
        _rotl(v1, 13)
        v1 ^= v0
        _rotl(v0, 32)
        v2 += v3
        _rotl(v3, 16)
        v3 ^= v2
        v0 += v3
        _rotl(v3, 21)
        v3 ^= v0
        v2 += v1
        _rotl(v1, 17)
        v1 ^= v2
        _rotl(v2, 32)


def _finalise(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (pandas spreads every 64-bit value with it), in place on uint64."""
    x ^= x >> _U64(30)
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)
    return x


def _siphash(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """SipHash-2-4 of the byte strings ``data[starts[i] : starts[i] + lengths[i]]``.

    A string of n bytes is n // 8 full little-endian words and a last word holding its n % 8
    remaining bytes and n mod 256 in the top byte; every string's j-th word is processed at once,
    the strings with more words first (those still running are a prefix of that order).
    """
    n = starts.size
    words = lengths // 8 + 1
    order = np.argsort(-words, kind="stable")
    starts, lengths, words = starts[order], lengths[order], words[order]
    k0, k1 = np.frombuffer(_KEY, "<u8").astype(_U64)
    v0 = np.full(n, k0 ^ _U64(0x736F6D6570736575))
    v1 = np.full(n, k1 ^ _U64(0x646F72616E646F6D))
    v2 = np.full(n, k0 ^ _U64(0x6C7967656E657261))
    v3 = np.full(n, k1 ^ _U64(0x7465646279746573))
    # Each string copied to a slot of whole words (zeros after it, its length in the last byte).
    slot = np.r_[0, np.cumsum(words[:-1])] * 8
    buf = np.zeros(int(words.sum()) * 8, np.uint8)
    # Each byte's place in its text, then the copy of every text into its slot.
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    buf[np.repeat(slot, lengths) + within] = data[np.repeat(starts, lengths) + within]
    buf[slot + 8 * words - 1] = (lengths & 0xFF).astype(np.uint8)
    table = buf.view("<u8").astype(_U64, copy=False)
    first = slot // 8
    for j in range(int(words.max()) if n else 0):
        live = int(np.searchsorted(-words, -(j + 1), side="right"))  # strings with a j-th word
        word = table[first[:live] + j]
        a0, a3 = v0[:live], v3[:live]  # views: the rounds update the running strings in place
        a3 ^= word
        _sip_rounds(a0, v1[:live], v2[:live], a3, 2)
        a0 ^= word
    v2 ^= _U64(0xFF)
    _sip_rounds(v0, v1, v2, v3, 4)
    out = np.empty(n, _U64)
    out[order] = v0 ^ v1 ^ v2 ^ v3
    return out


def _utf8_buffers(texts):
    """(bytes as uint8, start of each text, its length in bytes) of a sequence of str or a pyarrow
    string array (nulls are not allowed: hash only the rows that hold a text)."""
    import pyarrow as pa

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        from .arrow_arrays import text_array

        texts = text_array(texts.tolist() if isinstance(texts, np.ndarray) else texts)
    if pa.types.is_large_string(texts.type):
        texts = texts.cast(pa.string())
    if texts.null_count:
        raise ValueError("hash_text: a null among the texts (hash only the rows that hold one)")
    _, offsets_buf, data_buf = texts.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[texts.offset : texts.offset + len(texts) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


def hash_text(texts) -> np.ndarray:
    """Per text, a 64-bit hash (int64): ``pandas.util.hash_array(np.array(texts, dtype=object),
    categorize=False).astype(np.int64)``, i.e. SipHash-2-4 of the UTF-8 bytes under pandas's key,
    then the SplitMix64 finaliser.

    ``texts``: a sequence of str, or a pyarrow string array without nulls.  Hash distinct texts
    (a dictionary's values): the cost is per text and per 8 bytes of it.

    >>> hash_text(["a", ""]).tolist()
    [-4496393130729816112, 1760245841805064774]
    """
    data, starts, lengths = _utf8_buffers(texts)
    out = np.empty(starts.size, _U64)
    if not starts.size:
        return out.view(np.int64)
    # Batches of about _BATCH_BYTES of text, so that the word table stays small.
    ends = np.cumsum(lengths + 8)
    cuts = np.searchsorted(ends, np.arange(_BATCH_BYTES, int(ends[-1]) + _BATCH_BYTES, _BATCH_BYTES))
    lo = 0
    for hi in np.unique(np.r_[np.minimum(cuts + 1, starts.size), starts.size]).tolist():
        if hi > lo:
            out[lo:hi] = _siphash(data, starts[lo:hi], lengths[lo:hi])
            lo = hi
    return _finalise(out).view(np.int64)


def hash_numbers(values) -> np.ndarray:
    """Per number, pandas's 64-bit hash (uint64): its bits as uint64 (a float's NaN and −0.0
    made canonical: equal values hash equal), then the SplitMix64 finaliser; ``hash_array`` of a
    numeric array."""
    values = np.asarray(values)
    if values.dtype == bool:
        bits = values.astype(_U64)
    elif values.dtype.kind in "iuf" and values.dtype.itemsize <= 8:
        width = f"u{values.dtype.itemsize}"
        bits = values.view(width).astype(_U64)
        if values.dtype.kind == "f":
            bits[np.isnan(values)] = np.array(np.nan, dtype=values.dtype).view(width)
            bits[bits == np.array(-0.0, dtype=values.dtype).view(width)] = 0
    else:
        raise TypeError(f"hash_numbers takes booleans, integers or floats, got {values.dtype}")
    return _finalise(bits)


def combine_hashes(*columns) -> np.ndarray:
    """Per row, one 64-bit hash (int64) of several columns' hashes (uint64, from
    :func:`hash_numbers`): CPython's tuple hash as pandas combines the columns of a frame
    (``hash_pandas_object(frame, index=False)``): out = 0x345678; per column i of k,
    out = (out ^ h_i) · m_i with m_0 = 1000003, m_{i+1} = m_i + 82520 + 2(k − i); out + 97531."""
    k = len(columns)
    mult = _U64(1000003)
    out = np.zeros_like(np.asarray(columns[0], _U64)) + _U64(0x345678)
    for i, h in enumerate(columns):
        out ^= np.asarray(h, _U64)
        out *= mult
        mult += _U64(82520 + 2 * (k - i))
    out += _U64(97531)
    return out.view(np.int64)
