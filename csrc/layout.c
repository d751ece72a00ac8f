/* alloc_extend / alloc_decode: the new-page counts, the layouts (host_layout's arithmetic), and
 * the one-pass takes (merge test, count, shortage check, layout on the free list). */
#include "native.h"

/* Σ over requests of (seq + ps - 1) // ps - (pre + ps - 1) // ps, wrapped
 * (layout.new_pages_per_request summed) */
static i64 count_extend(const i64 *pre, const i64 *seq, i64 bs, i64 ps) {
    u64 total = 0;
    for (i64 r = 0; r < bs; r++)
        total += (u64)div_floor(wrap_add(seq[r], ps - 1), ps) -
                 (u64)div_floor(wrap_add(pre[r], ps - 1), ps);
    return (i64)total;
}

/* The extend layout into out[0, num_tokens): 0, or -1 when the batch is irregular (a negative
 * extend, Σ extend != num_tokens, Σ new pages != num_pages). Request r writes last_r + 1 + i
 * for the rest of its prefix's last page, then whole rows new_page * ps + i, the last one cut
 * to the tokens left (host_layout.extend_slots); at ps 1 its tokens are its new pages. */
static int lay_out_extend(const i64 *pre, const i64 *seq, const i64 *last, i64 bs,
                          const i64 *pages, i64 num_pages, i64 ps, i64 *out, i64 num_tokens) {
    i64 t = 0, page = 0;
    for (i64 r = 0; r < bs; r++) {
        const i64 e = (i64)((u64)seq[r] - (u64)pre[r]);
        if (e < 0 || e > num_tokens - t) return -1;
        if (ps == 1) { /* every token is the next new page */
            if (e > num_pages - page) return -1;
            memcpy(out + t, pages + page, (size_t)e * sizeof(i64));
            t += e;
            page += e;
            continue;
        }
        i64 p1 = mod_floor(wrap_neg(pre[r]), ps);
        if (p1 > e) p1 = e;
        fill_run(out + t, wrap_add(last[r], 1), p1);
        t += p1;
        for (i64 m = e - p1; m > 0;) {
            if (page >= num_pages) return -1;
            const i64 k = m < ps ? m : ps;
            fill_run(out + t, wrap_mul(pages[page++], ps), k);
            t += k;
            m -= k;
        }
    }
    return (t == num_tokens && page == num_pages) ? 0 : -1;
}

/* How many requests open a page: seq % ps == 1 % ps */
static i64 count_decode(const i64 *seq, i64 bs, i64 ps) {
    const i64 opening = 1 % ps;
    i64 count = 0;
    for (i64 r = 0; r < bs; r++) count += mod_floor(seq[r], ps) == opening;
    return count;
}

/* The decode layout into out[0, bs): the r-th opening request takes
 * pages[min(r, num_pages - 1)] * ps, every other one last + 1 (layout.decode_slots); with no
 * pages every request continues. */
static void lay_out_decode(const i64 *seq, const i64 *last, i64 bs, const i64 *pages,
                           i64 num_pages, i64 ps, i64 *out) {
    const i64 opening = 1 % ps;
    i64 rank = 0;
    for (i64 r = 0; r < bs; r++) {
        if (num_pages > 0 && mod_floor(seq[r], ps) == opening) {
            out[r] = wrap_mul(pages[rank < num_pages ? rank : num_pages - 1], ps);
            rank++;
        } else {
            out[r] = wrap_add(last[r], 1);
        }
    }
}

/* 1 when the extends seq[r] - pre[r] are each >= 0 and sum to exactly num_tokens (no wrap),
 * else 0: only then is an output of num_tokens slots laid out here (an empty batch, a negative
 * extend or a count that disagrees goes to the caller's form, which raises) */
static int extend_regular(const i64 *pre, const i64 *seq, i64 bs, i64 num_tokens) {
    i64 total = 0;
    for (i64 r = 0; r < bs; r++) {
        i64 e;
        if (__builtin_sub_overflow(seq[r], pre[r], &e) || e < 0 || e > num_tokens - total)
            return 0;
        total += e;
    }
    return total == num_tokens;
}

/* The int64 data of the tensors args[0, count), each of *bs values (*bs < 0: of the first's
 * length, stored), once torch's tensors may be read: 1; 0 with no error set when one of them is
 * not a tensor the loops read or their lengths differ (not_taken); -1 with an error set. */
static int batch_of(PyObject *const *args, int count, i64 *bs, const i64 **data) {
    const int readable = may_read_tensors();
    if (readable <= 0) return readable;
    for (int i = 0; i < count; i++) {
        const int read = tensor_data(args[i], bs, &data[i]);
        if (read <= 0) return read;
    }
    return 1;
}

/* extend_count(pre, seq, ps) -> int | None: count_extend over the int64 tensors pre and seq
 * (the host lengths, one length). None for tensors the loops do not read or of two lengths
 * (the caller's numpy form counts them); ValueError for ps < 1. */
PyObject *extend_count(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *lens[2];
    i64 ps, bs = -1;
    if (nargs_is(n, 3, "extend_count") || arg_page_size(args[2], "extend_count", &ps))
        return NULL;
    if (batch_of(args, 2, &bs, lens) <= 0) return not_taken();
    return PyLong_FromLongLong(count_extend(lens[0], lens[1], bs, ps));
}

/* extend_layout(pre, seq, last, new_pages, ps, num_tokens) -> tensor | False | None: the
 * extend layout of the int64 tensors pre, seq and last (one length) on the int64 buffer
 * new_pages, every one of its pages taken, as a new int64 tensor of num_tokens slots
 * (lay_out_extend). False, nothing allocated, for a batch the loop finds irregular (extends not
 * >= 0 or not summing to num_tokens, another page count: the caller's numpy form gives the
 * result or the error). None for tensors the loops do not read, lengths that differ, or
 * num_tokens < 1 or outside int64 (the numpy form). ValueError for ps < 1; TypeError for a
 * new_pages that is not a C-contiguous int64 buffer; MemoryError when the slots cannot be had. */
PyObject *extend_layout(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *batch[3];
    i64 ps, num_tokens, bs = -1, *out;
    Py_buffer pages_buf;
    if (nargs_is(n, 6, "extend_layout") || arg_page_size(args[4], "extend_layout", &ps))
        return NULL;
    const int fits = arg_i64_fits(args[5], &num_tokens);
    if (fits < 0 || arg_buf(args[3], &pages_buf, 0)) return NULL;
    PyObject *slots = NULL;
    const int read = fits && num_tokens >= 1 ? batch_of(args, 3, &bs, batch) : 0;
    /* checked before the output is allocated: a huge num_tokens is only had for a batch of it */
    int irregular = read > 0 && !extend_regular(batch[0], batch[1], bs, num_tokens);
    if (read > 0 && !irregular && (slots = new_int64s(num_tokens, &out)) != NULL &&
        lay_out_extend(batch[0], batch[1], batch[2], bs, pages_buf.buf, pages_buf.len / 8, ps,
                       out, num_tokens) != 0) {
        Py_CLEAR(slots);
        irregular = 1; /* another page count */
    }
    PyBuffer_Release(&pages_buf);
    if (irregular) Py_RETURN_FALSE;
    if (read <= 0) return not_taken();
    return slots != NULL ? owned(slots) : NULL;
}

/* A one-pass take's merge (SORT-2): when pages are staged and ``need`` exceeds the free list
 * buf[*top:], merge_in_front with the staged pages at buf[base, base + *staged) (``runs`` as
 * staged_ascend's), then *top -= *staged and *staged = 0. 1: the take goes on from *top; 0,
 * nothing moved: the caller merges (base < 0, the list not known to ascend, pages not clear
 * of it, or a range merge_in_front declines); -1, nothing moved: an error is set. */
static int merge_if_short(i64 *buf, i64 len, i64 *top, i64 *staged, i64 base, PyObject *runs,
                          i64 need) {
    if (*staged <= 0 || need <= len - *top) return 1;
    if (base < 0 || base > *top - *staged) return 0;
    const int done = merge_in_front(buf, len, *top, base, *staged, runs);
    if (done == 1) {
        *top -= *staged;
        *staged = 0;
    }
    return done;
}

/* A one-pass take's batch: its tensors' data (pre NULL for a decode), its new pages and the
 * slots it returns. */
typedef struct {
    const i64 *pre, *seq, *last;
    i64 bs, ps, count, num_slots;
} Batch;

/* b laid out on ``pages`` into out: 0, or -1 when lay_out_extend finds the batch irregular */
static int lay_out(const Batch *b, const i64 *pages, i64 *out) {
    if (b->pre != NULL)
        return lay_out_extend(b->pre, b->seq, b->last, b->bs, pages, b->count, b->ps, out,
                              b->num_slots);
    lay_out_decode(b->seq, b->last, b->bs, pages, b->count, b->ps, out);
    return 0;
}

/* 1 when every request whose slots continue from its last_loc (the rest of an extend's partial
 * prefix page; a decode that opens no page) has that last_loc on a page handed out (EXTEND-3 /
 * DECODE-3 on the guard's bits), else 0. A last_loc the layout does not read is not checked
 * (a hybrid allocator's SWA side gets 0 for a peer its window released). */
static int lasts_owned(const Batch *b, const Owners *o) {
    /* at page size 1 every new token opens its own page: no request continues */
    if (o->bits == NULL || b->ps == 1) return 1;
    const i64 ps = b->ps, opening = 1;
    if ((ps & (ps - 1)) == 0) { /* a power of two: a mask and a shift (floor for any sign) */
        int shift = 0;
        while (((i64)1 << shift) < ps) shift++;
        const u64 mask = (u64)ps - 1;
        for (i64 r = 0; r < b->bs; r++) {
            const int continues = b->pre != NULL
                                      ? b->pre[r] < b->seq[r] && ((0u - (u64)b->pre[r]) & mask)
                                      : (i64)((u64)b->seq[r] & mask) != opening;
            if (continues && !is_owned(o, b->last[r] >> shift)) return 0;
        }
        return 1;
    }
    for (i64 r = 0; r < b->bs; r++) {
        /* the layout writes last_loc + 1, ... : the rest of an extend's partial prefix page
         * (p1 > 0), a decode that does not open a page */
        const int continues = b->pre != NULL
                                  ? b->pre[r] < b->seq[r] && mod_floor(wrap_neg(b->pre[r]), ps) > 0
                                  : mod_floor(b->seq[r], ps) != opening;
        if (continues && !is_owned(o, div_floor(b->last[r], ps))) return 0;
    }
    return 1;
}

/* The part of extend_take and decode_take after the batch is read: on the free list args[1]
 * from top (staged pages at base, runs args[5]) with the ownership bitmap ``owners``: the
 * last_loc check (lasts_owned), merge_if_short with ``need``, then their answer for b, the
 * pages handed out marked in the bitmap. None, nothing moved, when top lies outside the list's
 * buffer or a last_loc is not on a page handed out (the caller's form raises); NULL with an
 * error set. */
static PyObject *take(PyObject *const *args, PyObject *owners, i64 top, i64 staged, i64 base,
                      i64 need, const Batch *b) {
    Py_buffer free_buf, own_buf;
    Owners own;
    if (arg_owners(owners, &own_buf, &own)) return NULL;
    if (arg_buf(args[1], &free_buf, 1)) {
        PyBuffer_Release(&own_buf);
        return NULL;
    }
    i64 *free_pages = free_buf.buf;
    const i64 free_len = free_buf.len / 8;
    if (top < 0 || top > free_len || staged < 0 || !lasts_owned(b, &own)) {
        release2(&free_buf, &own_buf);
        Py_RETURN_NONE;
    }
    const int merged = merge_if_short(free_pages, free_len, &top, &staged, base, args[5], need);
    PyObject *result = NULL;
    i64 *slots;
    if (merged == 0) {
        result = Py_NewRef(Py_False);
    } else if (merged > 0 && b->count > free_len - top) {
        result = untaken(Py_None, top, staged);
    } else if (merged > 0 && (result = new_int64s(b->num_slots, &slots)) != NULL) {
        if (lay_out(b, free_pages + top, slots)) {
            Py_DECREF(result);
            result = untaken(Py_False, top, staged);
        } else {
            mark_taken(&own, free_pages + top, b->count, base >= 0);
            result = taken(result, top + b->count, staged);
        }
    }
    release2(&free_buf, &own_buf);
    return result;
}

/* 1 when a length given as two tensors (the device one and the host *_cpu one) holds the same
 * values in both: the counts come from the host one, the layout from the other, and a batch
 * whose two disagree is the two-step form's to refuse (EXTEND-1 / DECODE-1) */
static int same_values(const i64 *a, const i64 *b, i64 n) {
    return a == b || memcmp(a, b, (size_t)n * sizeof(i64)) == 0;
}

/* extend_take(ps, free, top, staged, base, runs, pre, pre_cpu, seq, seq_cpu, last, num_tokens,
 *             owners) -> (out, top, staged) | False | None
 * (the order of NativeOps.take_extend's arguments after ps: it is this function with ps bound)
 * alloc_extend in one pass, on the caller's tensors (int64, contiguous, CPU, one length each; a
 * length may be both its host and its device tensor) and the paged free list free[top:]
 * (ascending when base >= 0) with ``staged`` pages at free[base, base + staged) (``runs``: as
 * staged_ascend's).
 * When pages are staged and SGLang's bound num_tokens // ps + bs + 1 exceeds the list
 * (SORT-2), merges them in place (merge_if_short), or answers False, nothing moved, for the
 * caller to merge and call again. Then the new pages counted from the host lengths: out None
 * when they exceed the list (nothing laid out), else a new int64 tensor of num_tokens slots
 * laid out on the list's first pages (it owns the bytearray the loop filled), or False when the
 * loop finds the batch irregular (the caller's two-step form gives the result or the error);
 * top and staged are the counters after the call (a merge stays done whatever out is). None,
 * with nothing read past the tensors' attributes and nothing moved, for any input the loops do
 * not take (another dtype, layout or device, lengths that disagree, num_tokens < 1 or outside
 * int64, top outside the list's buffer, a batch whose extends are not >= 0 and summing to
 * num_tokens, a last_loc not on a page handed out: ``owners``, the ownership bitmap, whose bits
 * of the pages handed out are set). ValueError for ps < 1; TypeError for a free list that is not
 * a writable C-contiguous int64 buffer or owners that is neither None nor a writable bytes
 * buffer. */
PyObject *extend_take(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *pcp, *scp, *pp, *sp, *lp;
    i64 top, ps, num_tokens, staged, base, bs = -1;
    if (nargs_is(n, 13, "extend_take") || arg_page_size(args[0], "extend_take", &ps) ||
        arg_i64(args[2], &top) || arg_i64(args[3], &staged) || arg_i64(args[4], &base))
        return NULL;
    const int fits = arg_i64_fits(args[11], &num_tokens);
    if (fits < 0) return NULL;
    if (!fits || num_tokens < 1 || may_read_tensors() <= 0 ||
        tensor_data(args[9], &bs, &scp) <= 0 || tensor_data(args[7], &bs, &pcp) <= 0 ||
        tensor_or_same(args[6], args[7], pcp, &bs, &pp) <= 0 ||
        tensor_or_same(args[8], args[9], scp, &bs, &sp) <= 0 ||
        tensor_data(args[10], &bs, &lp) <= 0)
        return not_taken();
    if (!same_values(pp, pcp, bs) || !same_values(sp, scp, bs) ||
        !extend_regular(pp, sp, bs, num_tokens))
        Py_RETURN_NONE;
    const i64 count = count_extend(pcp, scp, bs, ps);
    if (count < 0) Py_RETURN_NONE;
    const Batch b = {pp, sp, lp, bs, ps, count, num_tokens};
    /* merge_bound: num_tokens // ps + bs + 1, saturated at INT64_MAX (above any list) */
    const i64 per_page = num_tokens / ps;
    const i64 bound = per_page < INT64_MAX - 1 - bs ? per_page + bs + 1 : INT64_MAX;
    return take(args, args[12], top, staged, base, bound, &b);
}

/* decode_count(seq, ps) -> int | None: count_decode over the int64 tensor seq (the host
 * lengths). None for a tensor the loops do not read; ValueError for ps < 1. */
PyObject *decode_count(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *seq;
    i64 ps, bs = -1;
    if (nargs_is(n, 2, "decode_count") || arg_page_size(args[1], "decode_count", &ps))
        return NULL;
    if (batch_of(args, 1, &bs, &seq) <= 0) return not_taken();
    return PyLong_FromLongLong(count_decode(seq, bs, ps));
}

/* decode_layout(seq, last, new_pages, ps) -> tensor | None: lay_out_decode of the int64
 * tensors seq and last (one length) on the int64 buffer new_pages, as a new int64 tensor of one
 * slot per request. None for tensors the loops do not read or of two lengths (the caller's
 * numpy form); ValueError for ps < 1; TypeError for a new_pages that is not a C-contiguous int64
 * buffer; MemoryError when the slots cannot be had. */
PyObject *decode_layout(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *batch[2];
    i64 ps, bs = -1, *out;
    Py_buffer pages_buf;
    if (nargs_is(n, 4, "decode_layout") || arg_page_size(args[3], "decode_layout", &ps) ||
        arg_buf(args[2], &pages_buf, 0))
        return NULL;
    const int read = batch_of(args, 2, &bs, batch);
    PyObject *slots = read > 0 ? new_int64s(bs, &out) : NULL;
    if (slots != NULL)
        lay_out_decode(batch[0], batch[1], bs, pages_buf.buf, pages_buf.len / 8, ps, out);
    PyBuffer_Release(&pages_buf);
    if (read <= 0) return not_taken();
    return slots != NULL ? owned(slots) : NULL;
}

/* decode_take(ps, free, top, staged, base, runs, seq, seq_cpu, last, owners)
 *   -> (out, top, staged) | False | None
 * alloc_decode in one pass, on the caller's tensors and free list as extend_take's (the merge
 * test: the batch outnumbers the list). The opening requests counted from the host lengths
 * (every request at ps 1); out None when they exceed the list, else a new int64 tensor of one
 * slot per request. None, nothing moved, for inputs the loops do not take, for an empty
 * batch and for a last_loc not on a page handed out (as extend_take's); ValueError for ps < 1
 * and TypeError for another free list or bitmap, as extend_take's. */
PyObject *decode_take(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *scp, *sp, *lp;
    i64 top, ps, staged, base, bs = -1;
    if (nargs_is(n, 10, "decode_take") || arg_page_size(args[0], "decode_take", &ps) ||
        arg_i64(args[2], &top) || arg_i64(args[3], &staged) || arg_i64(args[4], &base))
        return NULL;
    if (may_read_tensors() <= 0 || tensor_data(args[7], &bs, &scp) <= 0 || bs == 0 ||
        tensor_or_same(args[6], args[7], scp, &bs, &sp) <= 0 || tensor_data(args[8], &bs, &lp) <= 0)
        return not_taken();
    if (!same_values(sp, scp, bs)) Py_RETURN_NONE; /* else the layout could take a page twice */
    const i64 count = ps == 1 ? bs : count_decode(scp, bs, ps);
    const Batch b = {NULL, sp, lp, bs, ps, count, bs};
    return take(args, args[9], top, staged, base, bs, &b);
}
