"""Triton kernels of the global radix select: one request's top-k found by every program of its context.

Order keys (``kernels._order_key``) are resolved a byte at a time, most significant first, by a grid of
(program, request) programs; a request's programs stride over its real length a block at a time (block c,
c + programs, ...), so a short request in a long block table still spreads over them. A pass
(``_radix_pass_kernel``; pass 0 can also run inside the scores kernel, ``HIST``) has every program
histogram one byte of its blocks' keys in registers (256 bins, keys
whose higher bytes match the prefix so far) and add the non-zero bins to the request's histogram in
global memory; the last program of the request to finish (an atomic ticket) finds the bucket of the
k-th largest key and extends the request's prefix. Two passes fix 16 bits. ``_radix_compact_kernel``
then writes the sure winners (keys above the bucket) straight to the output through an atomic counter
and the bucket's tokens, with their keys, to a candidate list; its last program selects the rest among
those candidates (the low 16 bits, two more byte rounds, ties first come first): in registers when they
fit one block, which is the usual case, else block by block.

Per request, a zeroed int32 workspace row: ``[256 hist pass 0][256 hist pass 1][STATE]`` (``WS_WIDTH``;
the scores kernel can zero it, ``_zero_ws_row``, and the compaction's last program leaves it zeroed), and
an int64 candidate row: each its key (high word) and its KV slot (low word, the page table already walked),
one store and one load. Two pairs of state words are 64-bit counters, each taken by one atomic: the
winners' and candidates' counts (one round trip for both bases), and the compaction's ticket with the
candidates its programs wrote (the last program learns how many there are from its ticket).
No host sync; shapes only: CUDA-graph capturable. Which tokens tie at the k-th key are taken depends on
the atomics' order (the contract: any choice among equal keys).
"""

from __future__ import annotations

import triton
import triton.language as tl

from mla_kernels.pdl import wait_prior_grid

from .kernels import _order_key, _request_len

# Workspace row: two 256-bin histograms, then the state words. Even: every row's 64-bit pairs stay 8-byte
# aligned (``radix.workspace`` allocates rows of exactly this many words).
WS_WIDTH = 522
WS_WORDS = tl.constexpr(WS_WIDTH)  # the same, where kernels read it
WS_LANES = tl.constexpr(1 << (WS_WIDTH - 1).bit_length())  # a power of two covering the row
HIST_BINS = tl.constexpr(256)
ST_TICKET = tl.constexpr(512)  # + pass (0, 1): the passes' tickets (the one-launch select's first barriers)
ST_FINAL = tl.constexpr(514)  # 64-bit: the compaction's ticket (low word), candidates its programs wrote (high)
ST_PREFIX = tl.constexpr(516)  # the resolved high bytes of the k-th largest key (uint32 bits)
ST_NGT = tl.constexpr(517)  # keys known to rank above the bucket so far
ST_DONE = tl.constexpr(518)  # 1: the selection is exactly {key >= prefix}
ST_SYNC = tl.constexpr(519)  # the one-launch select's third grid barrier (``token_scores._coop_topk_kernel``)
ST_COUNTS = tl.constexpr(520)  # 64-bit counter: winners written (low word), candidates written (high word)
SMALL_FINAL = tl.constexpr(128)  # lanes of the final select when its candidates fit them (``_final_select``)


@triton.jit
def _zero_ws_row(ws_row):
    # The workspace row back to zeros (one launch fewer than a memset before the select).
    i = tl.arange(0, WS_LANES)
    tl.store(ws_row + i, tl.zeros([WS_LANES], dtype=tl.int32), mask=i < WS_WORDS)


@triton.jit
def _byte_hist(key, match, SHIFT: tl.constexpr):
    # 256-bin histogram of the byte at SHIFT over matching lanes. Non-matching lanes land in bin 0 and are
    # taken out again (no reliance on histogram masks, which the interpreter and GPU treat alike then).
    digit = tl.where(match, (key >> SHIFT) & 0xFF, 0).to(tl.int32)
    misses = key.shape[0] - tl.sum(match.to(tl.int32), axis=0)
    bins = tl.arange(0, 256)
    return tl.histogram(digit, 256) - tl.where(bins == 0, misses, 0)


@triton.jit
def _bucket(hist, k_rem):
    # The bin of a byte histogram holding its k_rem-th largest key: (bin, keys in higher bins, keys in it);
    # bin -1 when the histogram holds fewer than k_rem keys. One scan and two block-wide sums: the bin's
    # two counts come packed in one int64 (each below 2**31).
    bins = tl.arange(0, 256)
    count_ge = tl.cumsum(hist, 0, reverse=True)  # keys in this bin or a higher one: non-increasing
    d = tl.sum((count_ge >= k_rem).to(tl.int32), axis=0) - 1
    packed = ((count_ge - hist).to(tl.int64) << 32) | hist.to(tl.int64)
    pick = tl.sum(tl.where(bins == d, packed, 0), axis=0)
    return d, (pick >> 32).to(tl.int32), (pick & 0xFFFFFFFF).to(tl.int32)


@triton.jit
def _find_bucket(ws_row, hist, topk, SHIFT: tl.constexpr):
    # The request's full histogram of this byte: extend the prefix by the k-th largest key's byte.
    prefix = tl.load(ws_row + ST_PREFIX).to(tl.uint32, bitcast=True)
    n_gt = tl.load(ws_row + ST_NGT)
    k_rem = topk - n_gt
    d, above, in_bucket = _bucket(hist, k_rem)
    tl.store(ws_row + ST_PREFIX, (prefix | (d.to(tl.uint32) << SHIFT)).to(tl.int32, bitcast=True))
    tl.store(ws_row + ST_NGT, n_gt + above)
    tl.store(ws_row + ST_DONE, (in_bucket == k_rem - above).to(tl.int32))  # the bucket is taken whole


@triton.jit
def _add_hist(hist_row, h):
    # Add a histogram's non-zero bins to the request's. Relaxed: the ticket or grid barrier taken after it
    # (acq_rel, past a block barrier) is what publishes them; no fence per lane.
    tl.atomic_add(hist_row + tl.arange(0, 256), h, mask=h > 0, sem="relaxed")


@triton.jit
def _add_pair(ws_row, WORD: tl.constexpr, low, high, SEM: tl.constexpr):
    # One 64-bit atomic add of (low, high) to the int32 words WORD, WORD + 1 (8-byte aligned, both counts
    # non-negative and below 2**31): their old values, one round trip for two counters.
    pair = (ws_row + WORD).to(tl.pointer_type(tl.int64))
    old = tl.atomic_add(pair, (high.to(tl.int64) << 32) + low.to(tl.int64), sem=SEM)
    return (old & 0xFFFFFFFF).to(tl.int32), (old >> 32).to(tl.int32)


@triton.jit
def _flush_hist(ws_row, h, active, topk, PASS: tl.constexpr):
    # Add this program's histogram to the request's; the last of the request's ``active`` programs finds
    # the bucket. Atomic reads of the sums: they live in L2, where the other programs' atomics landed.
    bins = tl.arange(0, 256)
    hist_row = ws_row + PASS * HIST_BINS
    _add_hist(hist_row, h)
    tl.debug_barrier()  # every lane's add is issued before the ticket (acq_rel) is taken
    ticket = tl.atomic_add(ws_row + ST_TICKET + PASS, 1)
    if ticket == active - 1:
        hist = tl.atomic_add(hist_row + bins, tl.zeros([256], tl.int32))
        _find_bucket(ws_row, hist, topk, 24 - 8 * PASS)


@triton.jit
def _block_keys(row, t, n):
    # The order keys of the logits at ``t`` (those below ``n``; written by other programs: read past L1).
    return _order_key(tl.load(row + t, mask=t < n, other=0.0, cache_modifier=".cg"))


@triton.jit
def _keys_hist(key, valid, prefix, PASS: tl.constexpr):
    # Pass PASS's byte histogram of the ``valid`` keys whose higher bytes match ``prefix``.
    if PASS == 0:
        match = valid
    else:
        match = valid & ((key >> 24) == (prefix >> 24))
    return _byte_hist(key, match, 24 - 8 * PASS)


@triton.jit
def _block_hist(row, t, n, prefix, PASS: tl.constexpr):
    # Pass PASS's byte histogram of the logits at ``t`` (those below ``n``) whose higher bytes match ``prefix``.
    return _keys_hist(_block_keys(row, t, n), t < n, prefix, PASS)


@triton.jit
def _active(n, programs, BLOCK: tl.constexpr):
    # A request's programs with a block of its ``n`` tokens, where ``programs`` stride over its real length a
    # block at a time: the ones its tickets and barriers count.
    return tl.minimum(programs, tl.cdiv(n, BLOCK))


@triton.jit
def _radix_pass_kernel(
    logits_ptr, seq_ptr, ws_ptr,
    stride_lb, stride_wb,
    topk, max_ctx,
    PASS: tl.constexpr, BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    c = tl.program_id(0)
    b = tl.program_id(1)
    programs = tl.num_programs(0)
    n = _request_len(seq_ptr, b, max_ctx)
    ws_row = ws_ptr + b * stride_wb
    if c * BLOCK < n:
        if n > topk:  # else every token is selected: nothing to resolve
            if tl.load(ws_row + ST_DONE) == 0:
                prefix = tl.load(ws_row + ST_PREFIX).to(tl.uint32, bitcast=True)
                row = logits_ptr + b * stride_lb
                h = tl.zeros([256], dtype=tl.int32)
                for t0 in range(c * BLOCK, n, programs * BLOCK):  # blocks c, c + programs, ... of the real length
                    h += _block_hist(row, t0 + tl.arange(0, BLOCK), n, prefix, PASS)
                _flush_hist(ws_row, h, _active(n, programs, BLOCK), topk, PASS)


@triton.jit
def _cand(cand_row, j, ok):
    # Candidates j as (KV slot, key), packed by the compaction (in L2: read past L1).
    v = tl.load(cand_row + j, mask=ok, other=0, cache_modifier=".cg").to(tl.uint64, bitcast=True)
    return (v & 0xFFFFFFFF).to(tl.int32), (v >> 32).to(tl.uint32)


@triton.jit
def _round(h, prefix, n_gt, topk, SHIFT: tl.constexpr):
    # A byte histogram of the bucket's keys -> (prefix, n_gt, done), as ``_find_bucket`` does it.
    k_rem = topk - n_gt
    d, above, in_bucket = _bucket(h, k_rem)
    return prefix | (d.to(tl.uint32) << SHIFT), n_gt + above, in_bucket == k_rem - above


@triton.jit
def _in_prefix(key, ok, prefix, SHIFT: tl.constexpr):
    return ok & ((key >> (SHIFT + 8)) == (prefix >> (SHIFT + 8)))


@triton.jit
def _list_byte_pass(cand_row, m, prefix, n_gt, topk, SHIFT: tl.constexpr, FBLOCK: tl.constexpr):
    # One byte round of the final select over the candidate list, block by block.
    h = tl.zeros([256], dtype=tl.int32)
    for j0 in range(0, m, FBLOCK):
        j = j0 + tl.arange(0, FBLOCK)
        ok = j < m
        _, key = _cand(cand_row, j, ok)
        h += _byte_hist(key, _in_prefix(key, ok, prefix, SHIFT), SHIFT)
    return _round(h, prefix, n_gt, topk, SHIFT)


@triton.jit
def _write_block(slot, key, ok, j, thr, k_eq, n_above, whole, out_row, topk, base_gt, base_eq):
    # Write one block of candidates' slots at their ranks (``_selection``'s threshold, keys equal to it
    # still to take, where the ties start, whether it is taken whole). Returns the new bases.
    gt = ok & tl.where(whole, key >= thr, key > thr)
    eq = ok & (key == thr) & (j * 0 + k_eq > 0)  # scalar as tensor: interpreter
    gt_i = gt.to(tl.int32)
    eq_i = eq.to(tl.int32)
    eq_rank = base_eq + tl.cumsum(eq_i, 0) - 1
    take = (gt_i + (eq & (eq_rank < k_eq)).to(tl.int32)) > 0
    pos = tl.where(gt, base_gt + tl.cumsum(gt_i, 0) - 1, n_above + eq_rank)
    tl.store(out_row + pos, slot, mask=take & (pos < topk))
    return base_gt + tl.sum(gt_i, axis=0), base_eq + tl.sum(eq_i, axis=0)


@triton.jit
def _selection(topk, p1, done1, p2, g2, done2):
    # After the two low byte rounds: done1 means {key >= p1} exactly; else p2 is the k-th largest key and
    # g2 keys rank above it.
    whole = done1 | done2
    return tl.where(done1, p1, p2), tl.where(whole, 0, topk - g2), tl.where(whole, topk, g2), whole


@triton.jit
def _select_block(cand_row, m, prefix, n_gt0, out_row, topk, BLOCK: tl.constexpr):
    # ``_final_select`` for m <= BLOCK candidates: every round on their keys in registers.
    j = tl.arange(0, BLOCK)
    ok = j < m
    slot, key = _cand(cand_row, j, ok)
    p1, g1, done1 = _round(_byte_hist(key, _in_prefix(key, ok, prefix, 8), 8), prefix, n_gt0, topk, 8)
    p2, g2, done2 = _round(_byte_hist(key, _in_prefix(key, ok, p1, 0), 0), p1, g1, topk, 0)
    thr, k_eq, n_above, whole = _selection(topk, p1, done1, p2, g2, done2)
    _write_block(slot, key, ok, j, thr, k_eq, n_above, whole, out_row, topk, n_gt0, tl.zeros([], dtype=tl.int32))


@triton.jit
def _final_select(m, prefix, n_gt0, cand_row, out_row, topk, FBLOCK: tl.constexpr):
    # The bucket's ``m`` candidates (their high 16 bits equal the prefix's; ``n_gt0`` keys rank above them):
    # the low two bytes, then the writes at [n_gt0, topk) of the row; keys equal to the k-th largest are
    # taken first come first. A few candidates, the usual case, take a block of ``SMALL_FINAL`` lanes: its
    # histograms cost a fraction of a full block's.
    SMALL: tl.constexpr = SMALL_FINAL if SMALL_FINAL < FBLOCK else FBLOCK
    if m <= SMALL:
        _select_block(cand_row, m, prefix, n_gt0, out_row, topk, SMALL)
    elif m <= FBLOCK:
        _select_block(cand_row, m, prefix, n_gt0, out_row, topk, FBLOCK)
    else:
        p1, g1, done1 = _list_byte_pass(cand_row, m, prefix, n_gt0, topk, 8, FBLOCK)
        p2, g2, done2 = _list_byte_pass(cand_row, m, p1, g1, topk, 0, FBLOCK)
        thr, k_eq, n_above, whole = _selection(topk, p1, done1, p2, g2, done2)
        base_gt = n_gt0
        base_eq = tl.zeros([], dtype=tl.int32)
        for j0 in range(0, m, FBLOCK):
            j = j0 + tl.arange(0, FBLOCK)
            ok = j < m
            slot, key = _cand(cand_row, j, ok)
            base_gt, base_eq = _write_block(
                slot, key, ok, j, thr, k_eq, n_above, whole, out_row, topk, base_gt, base_eq
            )


@triton.jit
def _page_slots(page, t, num_pages):
    # The KV slots of token positions ``t`` from their page-table entries (-1 on an unmapped page).
    return tl.where((page >= 0) & (page < num_pages), page * 256 + t % 256, -1)


@triton.jit
def _slots(bt_row, t, mask, num_pages):
    # The KV slots of token positions ``t`` (the page-table walk; -1 on an unmapped page).
    return _page_slots(tl.load(bt_row + t // 256, mask=mask, other=0), t, num_pages)


@triton.jit
def _compact_keys(key, t, n, prefix, done, ws_row, out_row, bt_row, cand_row, topk, num_pages, slot=None):
    # The keys of tokens ``t`` (those below ``n``): the sure winners' slots to the output, the bucket's keys
    # (high 16 bits equal to the prefix's) with their slots to the candidate list, at bases from one 64-bit
    # atomic on both counters (relaxed: the ticket orders). ``done``: the selection is exactly {key >= prefix}.
    # ``slot``: the tokens' KV slots where the caller walked the page table ahead. Returns the candidates
    # written.
    valid = t < n
    win = valid & tl.where(done > 0, key >= prefix, (key >> 16) > (prefix >> 16))
    cand = valid & ((key >> 16) == (prefix >> 16)) & (t * 0 + done == 0)  # scalar as tensor: interpreter
    win_i = win.to(tl.int32)
    cand_i = cand.to(tl.int32)
    n_cand = tl.sum(cand_i, axis=0)
    # The page-table walk and the ranks' scans wait for the atomic (its result comes back through a block
    # barrier); placed before it, they made ptxas spill (sm_120: Triton 3.6 at BLOCK 2048, 3.9 in the
    # one-launch kernel).
    w0, c0 = _add_pair(ws_row, ST_COUNTS, tl.sum(win_i, axis=0), n_cand, "relaxed")
    pos = w0 + tl.cumsum(win_i, 0) - 1
    if slot is None:
        slot = _slots(bt_row, t, win | cand, num_pages)
    tl.store(out_row + pos, slot, mask=win & (pos < topk))
    packed = (key.to(tl.uint64) << 32) | slot.to(tl.uint32).to(tl.uint64)
    tl.store(cand_row + c0 + tl.cumsum(cand_i, 0) - 1, packed.to(tl.int64, bitcast=True), mask=cand)
    return n_cand


@triton.jit
def _compact_block(row, t, n, prefix, done, ws_row, out_row, bt_row, cand_row, topk, num_pages):
    # ``_compact_keys`` of the logits at ``t``.
    return _compact_keys(_block_keys(row, t, n), t, n, prefix, done, ws_row, out_row, bt_row, cand_row, topk,
                         num_pages)  # fmt: skip


@triton.jit
def _compaction_ticket(ws_row, cands):
    # After a program's compaction: its ticket and its ``cands`` candidates in one 64-bit atomic (acq_rel:
    # its stores published, every earlier program's seen). Returns (ticket, candidates written so far).
    tl.debug_barrier()  # every lane's candidate is stored before the ticket is taken
    ticket, before = _add_pair(ws_row, ST_FINAL, tl.full([], 1, tl.int32), cands, "acq_rel")
    return ticket, before + cands


@triton.jit
def _pad_row(out_row, n_sel, topk, OUT_BLOCK: tl.constexpr):
    # -1 at [n_sel, topk) of an output row.
    o = tl.arange(0, OUT_BLOCK)
    for s0 in range(0, topk, OUT_BLOCK):
        tl.store(out_row + s0 + o, tl.full([OUT_BLOCK], -1, tl.int32), mask=(s0 + o >= n_sel) & (s0 + o < topk))


@triton.jit
def _load_acquire(ptr):
    # One int32 read with acquire order at GPU scope: a plain load, not a read-modify-write, so programs
    # waiting on a counter do not queue in L2's atomic unit ahead of the arrivals they wait for.
    return tl.inline_asm_elementwise("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32,
                                     is_pure=False, pack=1)  # fmt: skip


@triton.jit
def _arrive(counter):
    # Count this program in at a grid barrier (``counter`` starts at zero); the arrival (acq_rel, after a
    # block barrier) publishes its stores. Returns the programs arrived so far, this one included.
    tl.debug_barrier()  # every lane's stores are issued before the arrival
    return tl.atomic_add(counter, 1, sem="acq_rel") + 1


@triton.jit
def _wait_all(counter, arrived, expected):
    # Wait until ``expected`` programs have arrived at ``counter``: every lane reads it with acquire order,
    # so it sees all their stores. Only for grids whose programs are all resident at once (never under the
    # interpreter, which runs them in turn).
    while arrived < expected:
        arrived = _load_acquire(counter)
    tl.debug_barrier()


@triton.jit
def _grid_sync(counter, expected):
    # Every one of ``expected`` programs waits here until all have arrived.
    _wait_all(counter, _arrive(counter), expected)


@triton.jit
def _radix_compact_kernel(
    logits_ptr, bt_ptr, seq_ptr, ws_ptr, cand_ptr, out_ptr,
    stride_lb, stride_btb, stride_wb, stride_cb, stride_ob,
    topk, max_ctx, num_pages,
    BLOCK: tl.constexpr, FBLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr,
    PDL: tl.constexpr = False, LEAVE_ZEROED: tl.constexpr = True,
):  # fmt: skip
    # LEAVE_ZEROED: the last program zeroes the workspace row (False: the state stays, for a test to read).
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    c = tl.program_id(0)
    b = tl.program_id(1)
    programs = tl.num_programs(0)
    n = _request_len(seq_ptr, b, max_ctx)
    ws_row = ws_ptr + b * stride_wb
    out_row = out_ptr + b * stride_ob
    bt_row = bt_ptr + b * stride_btb
    n_sel = tl.minimum(n, topk)
    if c == 0:  # the padding of every row, an empty request's too (it has no other program)
        _pad_row(out_row, n_sel, topk, OUT_BLOCK)
    if c * BLOCK < n:
        done = tl.where(n <= topk, 1, tl.load(ws_row + ST_DONE))  # n <= topk: prefix 0 keeps every token
        prefix = tl.load(ws_row + ST_PREFIX).to(tl.uint32, bitcast=True)
        row = logits_ptr + b * stride_lb
        cand_row = cand_ptr + b * stride_cb
        cands = tl.zeros([], dtype=tl.int32)
        for t0 in range(c * BLOCK, n, programs * BLOCK):
            cands += _compact_block(row, t0 + tl.arange(0, BLOCK), n, prefix, done, ws_row, out_row, bt_row,
                                    cand_row, topk, num_pages)  # fmt: skip
        ticket, m = _compaction_ticket(ws_row, cands)
        if ticket == _active(n, programs, BLOCK) - 1:
            n_gt = tl.load(ws_row + ST_NGT)
            if LEAVE_ZEROED:
                # Every other program is past its last use of the row (its ticket): leave it zeroed, as the
                # one-launch select does, so a caller's kept workspace needs no memset next time.
                tl.debug_barrier()  # every thread has read the row
                _zero_ws_row(ws_row)
            if done == 0:
                _final_select(m, prefix, n_gt, cand_row, out_row, topk, FBLOCK)


@triton.jit
def _kth_largest_radix(key, k):
    # In registers: the k-th largest key (key 0 marks an empty lane) in four byte rounds, or 0 when fewer
    # than k lanes are full. ``split_kernels._kth_largest`` (up to 16 two-bit rounds) may stop at a lower
    # threshold that exactly k lanes pass; ``_select_positions`` takes either.
    full = key != 0
    prefix = tl.zeros([], dtype=tl.uint32)
    k_rem = k + tl.zeros([], dtype=tl.int32)
    for p in tl.static_range(4):
        shift = 24 - 8 * p
        if p == 0:
            match = full
        else:
            match = full & ((key >> (shift + 8)) == (prefix >> (shift + 8)))
        d, above, _ = _bucket(_byte_hist(key, match, shift), k_rem)
        k_rem -= above  # bin -1 (fewer than k full lanes): the result is 0 whatever the prefix
        prefix = prefix | (tl.maximum(d, 0).to(tl.uint32) << shift)
    return tl.where(tl.sum(full.to(tl.int32), axis=0) >= k, prefix, 0)
