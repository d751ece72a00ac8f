/* The need_sort merge: staged pages sorted (radix) and merged into the ascending free list,
 * into a new array (merge_below) or in place in the stack's own buffer (merge_front). */
#include "native.h"

/* The first index k in [from, to) with a[k] >= bound (strict) or a[k] > bound (not strict), for
 * ascending a: a few steps of linear scan (interleaved runs), then galloping (long runs). */
static i64 run_end(const i64 *a, i64 from, i64 to, i64 bound, int strict) {
    i64 k = from;
    for (int step = 0; step < 8; step++, k++)
        if (k >= to || (strict ? a[k] >= bound : a[k] > bound)) return k;
    i64 lo = k, span = 1; /* a[lo - 1] is still inside the run */
    while (lo + span < to && (strict ? a[lo + span] < bound : a[lo + span] <= bound)) {
        lo += span;
        span *= 2;
    }
    i64 hi = lo + span < to ? lo + span : to; /* a[hi] ends the run, or hi == to */
    while (lo < hi) {
        const i64 mid = lo + (hi - lo) / 2;
        if (strict ? a[mid] < bound : a[mid] <= bound) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* 1 when p[0, n) ascends (repeats allowed): blocks of 256 compared without a branch (the
 * compiler vectorises them), stopping at the first block that descends */
static int ascends(const i64 *p, i64 n) {
    for (i64 lo = 1; lo < n; lo += 256) {
        const i64 hi = lo + 256 < n ? lo + 256 : n;
        int down = 0;
        for (i64 j = lo; j < hi; j++) down |= p[j] < p[j - 1];
        if (down) return 0;
    }
    return 1;
}

/* how many of the ascending f[0, nf) are < bound */
static i64 count_below(const i64 *f, i64 nf, i64 bound) {
    i64 lo = 0, hi = nf;
    while (lo < hi) {
        const i64 mid = lo + (hi - lo) / 2;
        if (f[mid] < bound) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* o[0, nf + ns) = the merge of the ascending f[0, nf) and s[0, ns) (equal values: f's first),
 * copied run by run. s must not overlap o; f may, when o <= f (a merge in place that ends where
 * f ends): every write lands at or before the free entry read next, so nothing unread is lost. */
static void merge_runs(const i64 *f, i64 nf, const i64 *s, i64 ns, i64 *o) {
    i64 i = 0, j = 0, k = 0;
    while (i < nf && j < ns) { /* copy whole runs: staged below f[i], free up to s[j] */
        const i64 js = run_end(s, j, ns, f[i], 1);
        memcpy(o + k, s + j, (size_t)(js - j) * sizeof(i64));
        k += js - j;
        j = js;
        if (j == ns) break;
        const i64 is = run_end(f, i, nf, s[j], 0);
        memmove(o + k, f + i, (size_t)(is - i) * sizeof(i64));
        k += is - i;
        i = is;
    }
    memmove(o + k, f + i, (size_t)(nf - i) * sizeof(i64));
    k += nf - i;
    memcpy(o + k, s + j, (size_t)(ns - j) * sizeof(i64));
}

/* merge_below(free, staged, out) -> below, or -1 when staged is not ascending.
 * free ascends; below = how many free pages are < max(staged); out[:below + len(staged)]
 * receives the merge of free[:below] and staged, ascending (equal values: free's first). */
PyObject *merge_below(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_buffer fb, sb, ob;
    if (nargs_is(n, 3, "merge_below") || arg_buf(args[0], &fb, 0)) return NULL;
    if (arg_bufs(args[1], &sb, args[2], &ob)) { PyBuffer_Release(&fb); return NULL; }
    const i64 *f = fb.buf, *s = sb.buf;
    i64 *o = ob.buf;
    const i64 nf = fb.len / 8, ns = sb.len / 8, no = ob.len / 8;
    i64 result = -1;
    if (ns > 0 && ascends(s, ns)) {
        const i64 lo = count_below(f, nf, s[ns - 1]);
        if (lo + ns <= no) {
            merge_runs(f, lo, s, ns, o);
            result = lo;
        } else {
            PyErr_SetString(PyExc_ValueError, "merge_below: output too small");
        }
    }
    PyBuffer_Release(&fb);
    release2(&sb, &ob);
    if (result == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLongLong(result);
}

#define RADIX_BITS 11
#define RADIX_SIZE (1 << RADIX_BITS)
/* v[0, len) sorted ascending in place, repeats kept: insertion sort up to SMALL_SORT values,
 * else LSD radix sort on value - min in RADIX_BITS-bit digits when max - min < 2^(3 *
 * RADIX_BITS). 1 when sorted; 0, nothing moved, for a wider range; -1 (MemoryError set) when
 * the scratch cannot be had. Linear in the values, whatever their runs. */
static int radix_sort(i64 *v, i64 len) {
    if (len <= SMALL_SORT) {
        insertion_sort(v, 0, len);
        return 1;
    }
    i64 lo = v[0], hi = v[0];
    for (i64 i = 1; i < len; i++) {
        if (v[i] < lo) lo = v[i];
        if (v[i] > hi) hi = v[i];
    }
    const u64 range = (u64)hi - (u64)lo;
    if ((range >> (RADIX_BITS * 3)) != 0) return 0;
    int passes = 0;
    while (passes < 3 && (range >> (RADIX_BITS * passes)) != 0) passes++;
    if (passes == 0) return 1; /* all equal */
    u64 *tmp = malloc((size_t)len * sizeof(u64));
    if (tmp == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    u64 *from = (u64 *)v, *to = tmp;
    for (i64 i = 0; i < len; i++) from[i] = (u64)v[i] - (u64)lo;
    static i64 count[RADIX_SIZE];
    for (int pass = 0; pass < passes; pass++) {
        const int shift = RADIX_BITS * pass;
        memset(count, 0, sizeof(count));
        for (i64 i = 0; i < len; i++) count[(from[i] >> shift) & (RADIX_SIZE - 1)]++;
        i64 at = 0;
        for (int d = 0; d < RADIX_SIZE; d++) {
            const i64 c = count[d];
            count[d] = at;
            at += c;
        }
        for (i64 i = 0; i < len; i++) to[count[(from[i] >> shift) & (RADIX_SIZE - 1)]++] = from[i];
        u64 *swap = from;
        from = to;
        to = swap;
    }
    for (i64 i = 0; i < len; i++) v[i] = (i64)(from[i] + (u64)lo);
    free(tmp);
    return 1;
}

/* sort_values(values) -> bool: the int64 buffer sorted ascending in place by radix_sort
 * (True); False, nothing moved, for a range of 2^33 or more (the caller's numpy sort takes
 * it). */
PyObject *sort_values(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_buffer b;
    if (nargs_is(n, 1, "sort_values") || arg_buf(args[0], &b, 1)) return NULL;
    const int sorted = radix_sort(b.buf, b.len / 8);
    PyBuffer_Release(&b);
    return sorted < 0 ? NULL : PyBool_FromLong(sorted);
}

/* 1 when s[0, count) ascends: from ``runs``, a list of the offsets where the runs the caller
 * vouches ascend start after the first (at 0), by comparing only the seams between them (an
 * offset outside (0, count): all of them read); else (runs not a list) all of them read
 * (ascends). 0 when not; -1 with an error set for a list item that is not an int. */
static int staged_ascend(const i64 *s, i64 count, PyObject *runs) {
    if (!PyList_Check(runs)) return ascends(s, count);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(runs); i++) {
        const long long r = PyLong_AsLongLong(PyList_GET_ITEM(runs, i));
        if (r == -1 && PyErr_Occurred()) return -1;
        if (r <= 0 || r >= count) return ascends(s, count);
        if (s[r] < s[r - 1]) return 0;
    }
    return 1;
}

/* need_sort's merge in the paged free list's own buffer buf[0, len). The list is buf[top:],
 * ascending; the staged pages are buf[base, base + count), in any order, clear of it (0 <=
 * base, base + count <= top). They are sorted where they lie, then merged with the free pages
 * below the largest of them into buf[top - count, top + below): SGLang's sort(free ∪ staged)
 * as the list buf[top - count:] (whether they ascend: staged_ascend with ``runs``). Nothing
 * moves when they ascend right below the list and end
 * below its front (pages given back in the order they were taken); otherwise they are copied
 * out first only when that span reaches them, the copy taken before anything moves. 1 merged;
 * 0, nothing moved, when their range is 2^33 or more (the caller sorts a copy); -1, nothing
 * moved, MemoryError set. O(count + below). */
int merge_in_front(i64 *buf, i64 len, i64 top, i64 base, i64 count, PyObject *runs) {
    if (count == 0) return 1;
    i64 *staged = buf + base;
    const int sorted = staged_ascend(staged, count, runs);
    if (sorted < 0) return -1;
    if (sorted && base + count == top && count_below(buf + top, len - top, staged[count - 1]) == 0)
        return 1; /* already sort(free ∪ staged) from top - count on */
    const int overlap = top - count < base + count;
    i64 *copy = overlap ? malloc((size_t)count * sizeof(i64)) : NULL;
    if (overlap && copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    const int done = sorted ? 1 : radix_sort(staged, count);
    if (done == 1) {
        if (copy != NULL) staged = memcpy(copy, staged, (size_t)count * sizeof(i64));
        const i64 below = count_below(buf + top, len - top, staged[count - 1]);
        merge_runs(buf + top, below, staged, count, buf + top - count);
    }
    free(copy);
    return done;
}

/* merge_front(buf, top, base, count, runs) -> bool: merge_in_front (the caller sets top -=
 * count when True); ValueError, nothing moved, when the staged pages are not clear of the list */
PyObject *merge_front(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_buffer b;
    i64 top, base, count;
    if (nargs_is(n, 5, "merge_front") || arg_i64(args[1], &top) || arg_i64(args[2], &base) ||
        arg_i64(args[3], &count) || arg_buf(args[0], &b, 1))
        return NULL;
    const i64 len = b.len / 8;
    int done = -1;
    if (top < 0 || top > len || base < 0 || base > top || count < 0 || count > top - base)
        PyErr_SetString(PyExc_ValueError, "merge_front: staged pages not clear of the list");
    else
        done = merge_in_front(b.buf, len, top, base, count, args[4]);
    PyBuffer_Release(&b);
    return done < 0 ? NULL : PyBool_FromLong(done);
}

/* ascends_across(buf, index) -> bool: whether buf[index - 1] < buf[index] (True when index is
 * not inside (0, len(buf))): a run pushed right below a sorted list keeps it sorted */
PyObject *ascends_across(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_buffer b;
    i64 index;
    if (nargs_is(n, 2, "ascends_across") || arg_i64(args[1], &index) || arg_buf(args[0], &b, 0))
        return NULL;
    const i64 *v = b.buf;
    const int up = index <= 0 || index >= b.len / 8 || v[index - 1] < v[index];
    PyBuffer_Release(&b);
    return PyBool_FromLong(up);
}
