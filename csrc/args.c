/* Argument helpers of the compiled functions: ints, the page size, int64 buffers, arity, new
 * int64 bytearrays. */
#include "native.h"

/* an int that fits an i64: 0; -1 with an error set (TypeError for a non-int, OverflowError for
 * one outside int64) */
int arg_i64(PyObject *o, i64 *out) {
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* an int that may lie outside int64: 1 with *out set when it fits, 0 (no error set) when it does
 * not, -1 with an error set when o is not an int */
int arg_i64_fits(PyObject *o, i64 *out) {
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (*out == -1 && PyErr_Occurred()) return -1;
    return overflow == 0;
}

/* The page size ``ps`` of the function ``fn``: 0 with *ps >= 1; -1 with ValueError naming the
 * argument for an int below 1 or outside int64, TypeError for a non-int. Every division and
 * modulo by ps relies on this check. */
int arg_page_size(PyObject *o, const char *fn, i64 *ps) {
    const int fits = arg_i64_fits(o, ps);
    if (fits < 0) return -1;
    if (fits && *ps >= 1) return 0;
    PyErr_Format(PyExc_ValueError, "%s: ps (the page size) must be an int >= 1, got %R", fn, o);
    return -1;
}

/* 1 when a buffer's struct format ``f`` is a native-order signed 8-byte int ('q', or 'l' of 8
 * bytes, optionally after '@', '=' or the machine's own byte-order mark) */
static int int64_format(const char *f) {
    const uint16_t probe = 1;
    const int little = *(const unsigned char *)&probe == 1;
    if (f == NULL) return 0; /* unsigned bytes */
    if (*f == '@' || *f == '=' || (*f == '<' && little) || ((*f == '>' || *f == '!') && !little))
        f++;
    return (f[0] == 'q' || f[0] == 'l') && f[1] == '\0';
}

/* A C-contiguous buffer of int64 values (a numpy int64 array; writable when asked): 0, released
 * by the caller; -1 with an error set (TypeError for another item type, BufferError or
 * ValueError from the exporter for a strided or read-only one). */
int arg_buf(PyObject *o, Py_buffer *b, int writable) {
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) return -1;
    if (b->itemsize != 8 || !int64_format(b->format)) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_TypeError, "kvpool.impl._native: an int64 buffer is required");
        return -1;
    }
    return 0;
}
/* the ownership bitmap: a writable C-contiguous buffer of bytes (a numpy uint8 array) as
 * Owners, or None for no guard; released by the caller */
int arg_owners(PyObject *o, Py_buffer *b, Owners *out) {
    if (o == Py_None) { /* the guard off: PyBuffer_Release of b does nothing */
        b->obj = NULL;
        out->bits = NULL;
        out->num_bits = 0;
        return 0;
    }
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return -1;
    if (b->itemsize != 1 || b->len > INT64_MAX / 8) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_TypeError, "kvpool.impl._native: a uint8 bitmap is required");
        return -1;
    }
    out->bits = b->buf;
    out->num_bits = (i64)b->len * 8;
    return 0;
}

/* The bits of pages [first, first + n) (n >= 1, 0 <= first, first + n <= num_bits): bytes
 * first >> 3 .. last >> 3, the two ends masked, the bytes between whole (tested 8 at a time).
 * op 1: set them; -1: clear them; 0: 1 when every one is set. */
static inline int span_bits(unsigned char *bits, i64 first, i64 n, int op) {
    const i64 last = first + n - 1;
    unsigned char *lo = bits + (first >> 3), *hi = bits + (last >> 3);
    unsigned char lo_mask = (unsigned char)(0xFFu << (first & 7));
    const unsigned char hi_mask = (unsigned char)(0xFFu >> (7 - (last & 7)));
    if (lo == hi) lo_mask &= hi_mask;
    if (op == 0) {
        if ((*lo & lo_mask) != lo_mask) return 0;
        if (lo == hi) return 1;
        if ((*hi & hi_mask) != hi_mask) return 0;
        const unsigned char *p = lo + 1;
        for (; p + 8 <= hi; p += 8) {
            u64 word;
            memcpy(&word, p, 8);
            if (word != ~(u64)0) return 0;
        }
        for (; p < hi; p++)
            if (*p != 0xFF) return 0;
        return 1;
    }
    *lo = op > 0 ? (unsigned char)(*lo | lo_mask) : (unsigned char)(*lo & ~lo_mask);
    if (lo != hi) {
        *hi = op > 0 ? (unsigned char)(*hi | hi_mask) : (unsigned char)(*hi & ~hi_mask);
        memset(lo + 1, op > 0 ? 0xFF : 0, (size_t)(hi - lo - 1));
    }
    return 1;
}

/* 1 when pages[i, i + 8) (i + 8 <= count) are 8 consecutive pages: its ends first (one compare
 * turns away almost every block of scattered pages), then all of them (no branch: vectorised) */
static inline int starts_run(const i64 *pages, i64 i, i64 count) {
    if (i + 8 > count || (u64)pages[i + 7] - (u64)pages[i] != 7) return 0;
    const u64 first = (u64)pages[i];
    u64 differ = 0;
    for (int j = 1; j < 7; j++) differ |= (u64)pages[i + j] ^ (first + (u64)j);
    return differ == 0;
}

/* The end of the run of consecutive pages that starts at pages[i] (i < count): the first j > i
 * where pages[j] != pages[i] + (j - i), or count. ``ascending``: the caller vouches that the
 * pages ascend strictly (a free list known to be sorted: distinct pages), so that when the
 * last page lies count - 1 - i above pages[i] the rest is one run, decided by its ends. */
static inline i64 run_end(const i64 *pages, i64 i, i64 count, int ascending) {
    const u64 first = (u64)pages[i];
    if (ascending && (u64)pages[count - 1] - first == (u64)(count - 1 - i)) return count;
    i64 j = i + 1;
    while (j < count && (u64)pages[j] == first + (u64)(j - i)) j++;
    return j;
}

/* 1 when the run pages [first, first + n) lies inside the bitmap */
static inline int run_inside(const Owners *o, i64 first, i64 n) {
    return first >= 0 && n <= o->num_bits - first;
}

/* Pages go by runs or one by one: a run (8 or more consecutive pages, starts_run) is set,
 * tested or cleared by its bytes (span_bits); otherwise the next LONE_PAGES pages go one bit
 * each in a tight loop, the common case of a token ring after some traffic, whose pages are
 * scattered (a run that starts inside such a stretch is taken by its single bits). */
#define LONE_PAGES 16

/* The take side of the guard: set the bits of pages[0, count) (pages from a free list, which
 * ``ascending`` says is known to ascend) */
void mark_taken(Owners *o, const i64 *pages, i64 count, int ascending) {
    if (o->bits == NULL) return;
    unsigned char *bits = o->bits;
    const u64 num_bits = (u64)o->num_bits;
    for (i64 i = 0; i < count;) {
        if (starts_run(pages, i, count)) {
            const i64 j = run_end(pages, i, count, ascending);
            if (run_inside(o, pages[i], j - i))
                span_bits(bits, pages[i], j - i, 1);
            else /* (no free list holds such a page: memory stays safe, nothing is marked) */
                for (i64 k = i; k < j; k++) set_owned(o, pages[k]);
            i = j;
            continue;
        }
        const i64 stop = count - i > LONE_PAGES ? i + LONE_PAGES : count;
        for (; i < stop; i++) {
            const u64 page = (u64)pages[i];
            if (page < num_bits) bits[page >> 3] |= (unsigned char)(1u << (page & 7));
        }
    }
}

/* The release side of the guard: clear the bits of pages[0, count), each of which must be set
 * (a page handed out, named once here): 0; -1 when one is not (outside the bitmap, clear, or
 * named again after its bit was cleared here), every bit as it was before. */
int claim_pages(Owners *o, const i64 *pages, i64 count) {
    if (o->bits == NULL) return 0;
    unsigned char *bits = o->bits;
    const u64 num_bits = (u64)o->num_bits;
    i64 i = 0;
    while (i < count) {
        if (starts_run(pages, i, count)) {
            const i64 j = run_end(pages, i, count, 0);
            if (!run_inside(o, pages[i], j - i) || !span_bits(bits, pages[i], j - i, 0))
                goto refuse;
            span_bits(bits, pages[i], j - i, -1);
            i = j;
            continue;
        }
        const i64 stop = count - i > LONE_PAGES ? i + LONE_PAGES : count;
        for (; i < stop; i++) {
            const u64 page = (u64)pages[i]; /* a negative page: beyond every bitmap */
            if (page >= num_bits) goto refuse;
            unsigned char *at = bits + (page >> 3);
            const unsigned char mask = (unsigned char)(1u << (page & 7));
            if (!(*at & mask)) goto refuse;
            *at = (unsigned char)(*at & ~mask);
        }
    }
    return 0;
refuse:
    mark_taken(o, pages, i, 0); /* exactly the bits cleared here: pages[0, i) */
    return -1;
}

/* an int64 buffer to read and one to write, both or neither (release both with release2) */
int arg_bufs(PyObject *in, Py_buffer *in_buf, PyObject *out, Py_buffer *out_buf) {
    if (arg_buf(in, in_buf, 0)) return -1;
    if (arg_buf(out, out_buf, 1)) {
        PyBuffer_Release(in_buf);
        return -1;
    }
    return 0;
}
void release2(Py_buffer *a, Py_buffer *b) {
    PyBuffer_Release(a);
    PyBuffer_Release(b);
}
int nargs_is(Py_ssize_t n, Py_ssize_t want, const char *name) {
    if (n == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, n);
    return -1;
}

/* *out = a * b for a, b >= 0: 0, or -1 when it does not fit an i64 */
int checked_mul(i64 a, i64 b, i64 *out) {
    if (a < 0 || b < 0 || (b != 0 && a > INT64_MAX / b)) return -1;
    *out = a * b;
    return 0;
}

/* A new bytearray of n int64 values (uninitialised: the caller writes every one before handing
 * it out) and its data; NULL with MemoryError set when n is negative or n * 8 bytes cannot be
 * had. */
PyObject *new_int64s(i64 n, i64 **data) {
    if (n < 0 || n > PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    if (out != NULL) *data = (i64 *)PyByteArray_AS_STRING(out);
    return out;
}
