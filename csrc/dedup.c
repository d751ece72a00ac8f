/* Sorted distinct pages (run compression, small sorts, a bounded merge sort), a free group's
 * copies (defer) and free()'s one-pass release into the free list. */
#include "native.h"

/* p[0, len) with every run of equal values compressed to one entry, in place: the new length;
 * *ascending is set when the entries left ascend strictly. */
static i64 compress_runs(i64 *p, i64 len, int *ascending) {
    i64 k = len > 0 ? 1 : 0;
    int up = 1;
    for (i64 i = 1; i < len; i++) {
        if (p[i] == p[k - 1]) continue;
        if (p[i] < p[k - 1]) up = 0;
        p[k++] = p[i];
    }
    *ascending = up;
    return k;
}

/* p[lo, hi) sorted ascending by insertion (a short span), repeats kept */
void insertion_sort(i64 *p, i64 lo, i64 hi) {
    for (i64 i = lo + 1; i < hi; i++) {
        const i64 v = p[i];
        i64 j = i;
        for (; j > lo && p[j - 1] > v; j--) p[j] = p[j - 1];
        p[j] = v;
    }
}

/* ascending p[0, k) with repeats dropped, in place: the new length */
static i64 drop_repeats(i64 *p, i64 k) {
    i64 kept = k > 0 ? 1 : 0;
    for (i64 i = 1; i < k; i++)
        if (p[i] != p[kept - 1]) p[kept++] = p[i];
    return kept;
}

/* p[0, k) sorted ascending by insertion (k small) and repeats dropped: the new length */
static i64 sort_small_distinct(i64 *p, i64 k) {
    insertion_sort(p, 0, k);
    return drop_repeats(p, k);
}

/* distinct_runs(pages) -> k or -k: the sorted distinct values of ``pages`` as pages[:k], in
 * place. Every run of equal values is first compressed to one entry; when those do not ascend
 * and number at most SMALL_SORT they are insertion-sorted here and repeats dropped (k); more
 * than that returns -k with pages[:k] the compressed runs, for the caller to sort and dedup
 * (numpy's sort beats a scalar one there). 0 for an empty buffer. */
PyObject *distinct_runs(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_buffer b;
    if (nargs_is(n, 1, "distinct_runs") || arg_buf(args[0], &b, 1)) return NULL;
    int ascending;
    i64 k = compress_runs(b.buf, b.len / 8, &ascending);
    if (!ascending && k <= SMALL_SORT) {
        k = sort_small_distinct(b.buf, k);
        ascending = 1;
    }
    PyBuffer_Release(&b);
    return PyLong_FromLongLong(ascending ? k : -k);
}

/* p[0, k) sorted ascending and repeats dropped, by insertion-sorted blocks of SMALL_SORT
 * merged bottom-up through tmp (k values): the new length */
static i64 sort_distinct(i64 *p, i64 k, i64 *tmp) {
    for (i64 lo = 0; lo < k; lo += SMALL_SORT)
        insertion_sort(p, lo, lo + SMALL_SORT < k ? lo + SMALL_SORT : k);
    i64 *from = p, *to = tmp;
    for (i64 width = SMALL_SORT; width < k; width *= 2) {
        for (i64 lo = 0; lo < k; lo += 2 * width) {
            const i64 mid = lo + width < k ? lo + width : k;
            const i64 hi = lo + 2 * width < k ? lo + 2 * width : k;
            i64 i = lo, j = mid, o = lo;
            while (i < mid && j < hi) to[o++] = from[j] < from[i] ? from[j++] : from[i++];
            memcpy(to + o, from + i, (size_t)(mid - i) * sizeof(i64));
            o += mid - i;
            memcpy(to + o, from + j, (size_t)(hi - j) * sizeof(i64));
        }
        i64 *swap = from;
        from = to;
        to = swap;
    }
    const i64 kept = drop_repeats(from, k);
    if (from != p) memcpy(p, from, (size_t)kept * sizeof(i64));
    return kept;
}

/* defer(slots, ps) -> bytearray | None: what a free group keeps of a free() input, a
 * new bytearray of the page ids slots // ps (ps 1: a copy of the slots) of an int64,
 * contiguous CPU tensor; None for any other (the caller's numpy form copies it); ValueError for
 * ps < 1. */
PyObject *defer(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *slots;
    i64 ps, count = -1;
    if (nargs_is(n, 2, "defer") || arg_page_size(args[1], "defer", &ps)) return NULL;
    if (may_read_tensors() <= 0 || tensor_data(args[0], &count, &slots) <= 0) return not_taken();
    i64 *out;
    PyObject *copy = new_int64s(count, &out);
    if (copy != NULL) divide_into(out, slots, count, ps);
    return copy;
}

/* The values a release gathers: a list of bytearrays of whole int64s end to end (1 with *k
 * set), 0 when an item is anything else; pages == NULL: only count them. */
static int gather_parts(PyObject *parts, i64 *pages, i64 *k) {
    i64 total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (!PyByteArray_Check(part) || PyByteArray_GET_SIZE(part) % 8 != 0) return 0;
        const i64 m = PyByteArray_GET_SIZE(part) / 8;
        if (pages != NULL) memcpy(pages + total, PyByteArray_AS_STRING(part), (size_t)m * 8);
        total += m;
    }
    *k = total;
    return 1;
}

/* Pages sorted and deduplicated in place, through a scratch of k values: the new length, or
 * -1 when more than MERGE_SORT distinct pages are out of order (left for numpy's sort). */
#define MERGE_SORT 4096
static i64 dedup_pages(i64 *pages, i64 k) {
    int ascending;
    k = compress_runs(pages, k, &ascending);
    if (ascending) return k;
    if (k <= SMALL_SORT) return sort_small_distinct(pages, k);
    if (k > MERGE_SORT) return -1;
    i64 *tmp = malloc((size_t)k * sizeof(i64));
    if (tmp == NULL) return -2;
    k = sort_distinct(pages, k, tmp);
    free(tmp);
    return k;
}

/* release(ps, source, dedup, buf, at, backwards, room, owners) -> k | -1 - k | None
 * (NativeOps.release: this function with ps bound)
 * A release into a free list's buffer in one pass. source: an int64, contiguous CPU tensor of
 * slots (its pages: slots // ps) or a list of bytearrays of int64 page ids end to end (what
 * defer returns). dedup: the sorted distinct pages, else all of them in order. The k pages go
 * to buf[at, at + k) (backwards: buf[at - k, at)) modulo len(buf); -1 - k, nothing written,
 * when k > room; None, nothing written, for a tensor the loops do not read, a list item that is
 * not a bytearray of whole int64s, or more than MERGE_SORT distinct pages out of order (the
 * caller's numpy form releases those). The guard: every page must be handed out (its bit in
 * ``owners``, the ownership bitmap, set) and named once among the k; the bits are cleared as
 * the pages are written; else None, nothing written and every bit as before (the caller's form
 * raises the clause). ValueError when ps < 1, at is outside [0, len(buf)] or k > len(buf)
 * (nothing written); TypeError for a buf that is not a writable C-contiguous int64 buffer or
 * owners that is neither None nor a writable bytes buffer. */
#define LOCAL_PAGES 512
PyObject *release(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    i64 ps, at, room, k = -1;
    const i64 *slots = NULL;
    if (nargs_is(n, 8, "release") || arg_page_size(args[0], "release", &ps) ||
        arg_i64(args[4], &at) || arg_i64(args[6], &room))
        return NULL;
    const int dedup = PyObject_IsTrue(args[2]), backwards = PyObject_IsTrue(args[5]);
    if (dedup < 0 || backwards < 0) return NULL;
    PyObject *source = args[1];
    const int listed = PyList_Check(source);
    if (listed ? !gather_parts(source, NULL, &k)
               : (may_read_tensors() <= 0 || tensor_data(source, &k, &slots) <= 0))
        return not_taken();
    i64 local[LOCAL_PAGES];
    i64 *pages = k <= LOCAL_PAGES ? local : malloc((size_t)k * sizeof(i64));
    if (pages == NULL) return PyErr_NoMemory();
    if (listed)
        gather_parts(source, pages, &k);
    else
        divide_into(pages, slots, k, ps);
    PyObject *result = NULL;
    if (dedup) k = dedup_pages(pages, k);
    if (k == -2) {
        PyErr_NoMemory();
    } else if (k == -1) {
        result = Py_NewRef(Py_None);
    } else if (k > room) {
        result = PyLong_FromLongLong(-1 - k);
    } else {
        Py_buffer b, own_buf;
        Owners own;
        if (arg_owners(args[7], &own_buf, &own) == 0) {
            if (arg_buf(args[3], &b, 1) == 0) {
                const i64 len = b.len / 8;
                if (at < 0 || at > len || k > len) {
                    PyErr_Format(PyExc_ValueError, "release: %lld pages at %lld do not fit a "
                                 "buffer of %lld", (long long)k, (long long)at, (long long)len);
                } else if (claim_pages(&own, pages, k) < 0) {
                    result = Py_NewRef(Py_None);
                } else {
                    const i64 start = backwards ? (at - k < 0 ? at - k + len : at - k) : at;
                    if (k > 0)
                        write_wrapped(b.buf, len, start == len ? 0 : start, pages, k, !backwards);
                    result = PyLong_FromLongLong(k);
                }
                PyBuffer_Release(&b);
            }
            PyBuffer_Release(&own_buf);
        }
    }
    if (pages != local) free(pages);
    return result;
}
