"""The indexer's select rule: which top-k select path a batch runs, by its size and (when the caller knows it)
its longest request. Every path returns the same slots, so the rule only moves time; each bound below is a
measurement, named where it was taken.
"""

from __future__ import annotations

# Which top-k select the bf16 path runs (the one place to flip it): "split" (chunk programs, two-bit
# rounds, then a merge), "split_radix" (the same split, byte-histogram rounds) or "radix" (the global
# radix select: every pass over all slices of a request, see ``radix``) or "radix_fused" (its pass 0
# run by the scores kernel on the logits it holds: one launch fewer). Where the split does not apply
# (``split.plan`` is None), the split paths fall back to the single-program radix select.
# SELECT may also be a tuple of (max batch, path) pairs, ascending, the last one's bound covering every
# batch: a batch runs the first path whose bound holds (the batch is a shape: no host sync).
# "coop" runs the scores and the global radix select in one launch (``coop``), for batches of at most
# ``coop.PER_SM`` requests per SM; above that it falls back to "radix".
SELECTS = ("split", "split_radix", "radix", "radix_fused", "coop")
# Measured on the H200 (docs/measurements/indexer_cross_04d766d.log): up to 16 requests the global radix
# select is 1.05-1.9x faster at 16K-64K tokens of context (one request at 64K: 40 against 75 us) and 6-11 us
# slower at 4K; at 32 requests the split path is faster at 4K-16K and 3% slower at 64K, at 64 faster.
# The one-launch "coop" against "radix" (indexer_coop_ab_session13.log): as fast or faster at one and two
# requests at every context; at 4-16 requests faster at 4K-16K but slower at 64K, so "radix" keeps those.
SELECT: str | tuple[tuple[int, str], ...] = ((2, "coop"), (16, "radix"), (1 << 31, "split"))
# A caller that knows its longest request on the host (``max_seq_len``, as a serving engine's batch
# metadata does; ``DecodeStep`` reads it once) lets the rule see context too: a batch that SELECT gives
# "split" runs LONG_SELECT's path when that request is longer than the bound of the last (from batch,
# bound) pair the batch reaches. Every path returns the same slots, so a wrong hint costs time only.
# Measured on the H200 at 17-128 requests (docs/measurements/indexer_long_select_session30.log): the chunked
# split 4-9 us faster at 4,096 tokens, the radix select 4-25 us faster from 6,144 tokens to 64K. Then the
# split's one program a request (up to ``split.ONE_MAX`` tokens) against the radix select at 6K / 8K
# (indexer_one_program_session33.log): the indexer alone 50.7-50.9 / 57.6-57.9 against 53.8-54.2 / 64.4-64.5 us
# at 64 requests, 70.4-70.9 / 84.2-84.5 against 80.9-81.6 / 98.9-99.6 at 128, within 2 us either way at 17-32; but
# the decode step at 17-32 requests 2.4-10 us slower (32 at 8K: 76.9-77.2 against 68.5), at 48 even, at 64 even
# at 6K and 2.4-4.0 us faster at 8K.
LONG_SELECT: tuple[str, tuple[tuple[int, int], ...]] = ("radix", ((1, 4096), (64, 8192)))


def long_bound(batch: int) -> int:
    """The longest request (tokens) a batch of ``batch`` requests keeps on the split (``LONG_SELECT``)."""
    return next((bound for from_batch, bound in reversed(LONG_SELECT[1]) if batch >= from_batch), 0)


# And a batch that SELECT gives "radix" runs the one-launch "coop" select when its longest request is short: (max
# batch, max longest request) pairs, the first whose batch bound holds (``longest_for``). Forced on the H200 at 3-16
# requests and 2K-32K tokens (docs/measurements/indexer_short_coop_session31.log), "coop" took 17.4-17.9 / 18.5-19.2 /
# 18.8-20.7 / 20.4-23.0 us at 3 / 4 / 8 / 16 requests up to 4K against "radix"'s 20.5-21.3 / 21.7-22.6 / 24.5-27.1 /
# 27.7-31.2, and was faster up to 32K at 8 requests and fewer (42.0 against 47.1-47.5 us at 8) and up to 16K at 16
# (41.5-41.7 against 48.3-48.6; at 32K 69.9-70.0 against 68.4-68.6).
SHORT_SELECT: tuple[tuple[int, int], ...] = ((8, 32768), (16, 16384))
# A batch given "coop" or "radix" runs the split (one program a request) when its longest request is shorter
# still: (max batch, max longest request), the first pair whose batch bound holds. On the H100, two rounds
# (docs/measurements/session40_h100.log): at 2-16 requests of 1K / 2K tokens the split took 14.0-15.2 /
# 16.1-18.6 us against the rule's 15.0-18.8 / 18.4-19.9, at 4K 1.3-2.4 us slower. One request joined at 2K once
# the split's rounds stopped early (docs/measurements/session44_h100.log): 12.0 against coop's 14.0 us (the decode
# step 17.6 against 20.1-20.4), at 4K 16.4 against 16.1 us, so coop keeps it. Past 2K (session46_h100.log, calls A
# and B, two rounds each): one request of 3K, the step 19.8 against 19.3-19.5 us, of 4K even; 2-3 requests of 4K, the
# indexer 17.0-17.3 against 18.4-19.1 us, the step the same or 0.4 us faster; 2 / 4 / 8 requests of 3K the indexer
# 16.3-16.4 / 17.7 / 18.0-18.1 against 19.5-19.8 / 18.9-19.1 / 20.1-20.2, the step even / 0.1-0.9 / 0.8-0.9 us faster
# (3 of 3K: 0.3-0.5 us slower, the step 0.4 faster), but 4 / 8 requests of 4K the step 0.5 / 4 us slower; 16 even.
# Against the rule before (call C and after it): the indexer 0.9-3.2 us faster where the path moved but 0.3-0.9
# slower at 3 of 3K; the step the same or up to 0.8 us faster, but for one round's 24.5-24.6 us at 2 requests of
# 3K-4K (21.9-22.5 in the other two, the rule 22.0-22.7). Once the one-program select ran 8 warps (session 50,
# docs/measurements/session50_h100.log, two rounds each, against the rule before): one request of 3K / 4K, the step
# 18.8-18.9 / 19.3-19.6 us against coop's 19.4 / 20.5 (calls A, C, E, I; call F: at top-k 128 and 2048 too, 0.2-1.1 us
# faster), past 4K (5K-8K, one or two requests) 4.4-6.1 us slower (call B); at 4-16 requests of 3K-4K the indexer
# 0.3-3.5 us faster where the path moves, the step 0.4-2.3 us faster at 4 / 6 / 12 / 14 / 16 of 4K and 12-16 of 3K,
# even at 10 of 3K, but 1.4-1.8 / 0.7-1.1 us slower at 8 / 10 of 4K (calls G, H). That loss was the select's PDL
# (session 52, docs/measurements/session52_h100.log, call B; not the decode placed beside it, session 53's call E): in
# stream order (``split.IN_ORDER_FEW``) the split's step at 8 / 10 x 4K took 30.3-30.5 / 33.5-33.6 us against coop's
# 32.2-32.4 / 36.1-36.2, so 1-16 requests run the split up to 4K. Against the rule before (call F): the step at 7 / 8 /
# 9 / 10 x 4K 29.9-30.1 / 30.2-30.5 / 31.8-32.0 / 33.0-33.2 us against 30.9 / 32.4-32.5 / 33.7-33.8 / 35.6-35.7, the
# indexer alone 18.0-19.3 against 20.1-21.6.
SHORT_SPLIT: tuple[tuple[int, int], ...] = ((16, 4096),)


def longest_for(pairs: tuple[tuple[int, int], ...], batch: int) -> int:
    """The longest request (tokens) that (max batch, max longest request) ``pairs`` allow a batch of ``batch``
    requests: the first pair whose batch bound holds; -1 where none covers the batch."""
    return next((longest for max_batch, longest in pairs if batch <= max_batch), -1)


def short_split_bound(batch: int) -> int:
    """The longest request (tokens) up to which a batch of ``batch`` requests runs the split (``SHORT_SPLIT``);
    -1 where no pair covers the batch."""
    return longest_for(SHORT_SPLIT, batch)


def check_select(path: str | None, name: str = "select") -> str | None:
    """``path`` when it is None (the rule: ``SELECT`` with its length hints) or one of ``SELECTS`` (every batch
    runs it, as a measurement's ``--select`` asks); else ValueError naming ``name`` and the choices."""
    if path is not None and path not in SELECTS:
        raise ValueError(f"{name} must be one of {', '.join(SELECTS)}, got {path!r}")
    return path


def short_split_ranges() -> list[tuple[int, int, int]]:
    """``SHORT_SPLIT`` as (smallest batch, largest batch, longest request) triples, one per pair."""
    lows = [1, *(batch + 1 for batch, _ in SHORT_SPLIT)][: len(SHORT_SPLIT)]  # none for an empty rule
    return [(low, batch, longest) for low, (batch, longest) in zip(lows, SHORT_SPLIT, strict=True)]


def _batches(low: int, high: int) -> str:
    """A range of batch sizes in words: "one request", "4 requests", "2-3 requests"."""
    return "one request" if high == 1 else f"{high} requests" if low == high else f"{low}-{high} requests"


def select_rule_text(select: str | None = None) -> str:
    """The select rule a call with ``select`` (``indexer_topk``'s) runs, in words, for a measurement's header."""
    if select is not None:
        return select
    if isinstance(SELECT, str):
        return SELECT
    long_path, (first, *more) = LONG_SELECT
    *bounded, (_, last) = SELECT
    by_batch = ", ".join([*(f"{path} up to {bound} requests" for bound, path in bounded), f"{last} above"])
    longer = "".join(f" ({bound:,} from {batch} requests)" for batch, bound in more)
    short = " or ".join(f"{batch} requests of at most {longest:,} tokens" for batch, longest in SHORT_SELECT)
    tiny = ", ".join(f"{longest:,} tokens at {_batches(low, high)}" for low, high, longest in short_split_ranges())
    return (f"{by_batch}; the split -> {long_path} past {first[1]:,} tokens of the longest request{longer}"
            + (f"; the radix -> coop up to {short}" if short else "")
            + (f"; coop or radix -> split up to {tiny}" if tiny else ""))


def select_path(
    batch: int, select: str | tuple[tuple[int, str], ...] | None = None, max_seq_len: int | None = None
) -> str:
    """The select path a batch of ``batch`` requests runs under ``select`` (default ``SELECT``), whose
    longest request has ``max_seq_len`` tokens if the caller knows (``LONG_SELECT``, ``SHORT_SPLIT``,
    ``SHORT_SELECT``). A rule that is one path (``indexer_topk``'s ``select``) runs that path whatever the
    length."""
    rule = SELECT if select is None else select
    path = rule if isinstance(rule, str) else next((p for bound, p in rule if batch <= bound), None)
    if not isinstance(rule, str) and max_seq_len is not None:
        if path == "split" and max_seq_len > long_bound(batch):
            path = LONG_SELECT[0]
        elif path in ("coop", "radix") and max_seq_len <= short_split_bound(batch):
            path = "split"
        elif path == "radix" and max_seq_len <= longest_for(SHORT_SELECT, batch):
            path = "coop"
    if path not in SELECTS:
        raise ValueError(f"select path must be one of {SELECTS}, got {path!r} (SELECT = {rule!r})")
    return path
