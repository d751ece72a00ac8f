/* Argument helpers of the compiled functions: ints, addresses, int64 buffers, arity, new
 * int64 bytearrays. */
#include "native.h"

int arg_ptr(PyObject *o, void **out) {
    *out = PyLong_AsVoidPtr(o);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}
int arg_i64(PyObject *o, i64 *out) {
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}
/* a C-contiguous buffer of 8-byte items (a numpy int64 array); released by the caller */
int arg_buf(PyObject *o, Py_buffer *b, int writable) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->itemsize != 8) {
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

/* 1 when p[0, n) are the consecutive pages p[0], p[0] + 1, ... (one pass the compiler
 * vectorises: an OR of each page XOR its place; AVX2 where the CPU has it) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
static int consecutive(const i64 *p, i64 n) {
    const u64 first = (u64)p[0];
    u64 differ = 0;
    for (i64 j = 0; j < n; j++) differ |= (u64)p[j] ^ (first + (u64)j);
    return differ == 0;
}

/* The 64 bits of pages [first, first + 64) (0 <= first, first + 64 <= num_bits) as the
 * little-endian word at byte first >> 3 shifted by first & 7, and the low bits of the byte
 * after it when that shift is not 0 (then inside the bitmap: page first + 63 lies there).
 * op 1: set them; 0: 1 when all are set; -1: clear them. */
static int span64(Owners *o, i64 first, int op) {
    unsigned char *at = o->bits + (first >> 3);
    const unsigned shift = (unsigned)(first & 7);
    const u64 word_mask = ~(u64)0 << shift;
    const unsigned char tail_mask = (unsigned char)((1u << shift) - 1u);
    u64 word = 0;
    for (int b = 0; b < 8; b++) word |= (u64)at[b] << (8 * b); /* little-endian, any host */
    if (op == 0)
        return (word & word_mask) == word_mask && (!shift || (at[8] & tail_mask) == tail_mask);
    word = op > 0 ? word | word_mask : word & ~word_mask;
    for (int b = 0; b < 8; b++) at[b] = (unsigned char)(word >> (8 * b));
    if (shift) at[8] = op > 0 ? (unsigned char)(at[8] | tail_mask)
                              : (unsigned char)(at[8] & ~tail_mask);
    return 1;
}

#define GUARD_BLOCK 64
/* 1 when pages[i, i + GUARD_BLOCK) is a run of consecutive pages inside the bitmap;
 * ``ascending``: the caller vouches that the pages ascend strictly (a free list known to be
 * sorted: its pages are distinct), so that its ends decide it */
static inline int block_run(const Owners *o, const i64 *pages, i64 i, i64 count,
                            int ascending) {
    if (i + GUARD_BLOCK > count || pages[i] < 0 || pages[i] > o->num_bits - GUARD_BLOCK)
        return 0;
    return ascending ? (u64)pages[i + GUARD_BLOCK - 1] - (u64)pages[i] == GUARD_BLOCK - 1
                     : consecutive(pages + i, GUARD_BLOCK);
}

/* The take side of the guard: set the bits of pages[0, count) (pages from a free list, which
 * ``ascending`` says is known to ascend; a block of consecutive pages, the common case, by
 * its word) */
void mark_taken(Owners *o, const i64 *pages, i64 count, int ascending) {
    if (o->bits == NULL) return;
    for (i64 i = 0; i < count;) {
        if (block_run(o, pages, i, count, ascending)) {
            span64(o, pages[i], 1);
            i += GUARD_BLOCK;
        } else { /* a block that is not one run: by bytes of 8 consecutive pages, else by page */
            const i64 stop = i + GUARD_BLOCK < count ? i + GUARD_BLOCK : count;
            for (; i + 8 <= stop && i + 8 <= count; i += 8) {
                if (pages[i] >= 0 && pages[i] <= o->num_bits - 8 && consecutive(pages + i, 8)) {
                    const i64 at = pages[i] >> 3;
                    const unsigned shift = (unsigned)(pages[i] & 7);
                    o->bits[at] |= (unsigned char)(0xFFu << shift);
                    if (shift) o->bits[at + 1] |= (unsigned char)((1u << shift) - 1u);
                } else {
                    for (int k = 0; k < 8; k++) set_owned(o, pages[i + k]);
                }
            }
            for (; i < stop; i++) set_owned(o, pages[i]);
        }
    }
}

/* The release side of the guard: clear the bits of pages[0, count), each of which must be set
 * (a page handed out, named once here): 0; -1 when one is not, every bit as it was before. */
int claim_pages(Owners *o, const i64 *pages, i64 count) {
    if (o->bits == NULL) return 0;
    i64 i = 0;
    while (i < count) {
        if (block_run(o, pages, i, count, 0)) {
            if (!span64(o, pages[i], 0)) break;
            span64(o, pages[i], -1);
            i += GUARD_BLOCK;
        } else if (i + 8 <= count && pages[i] >= 0 && pages[i] <= o->num_bits - 8 &&
                   consecutive(pages + i, 8)) { /* 8 consecutive pages: one or two bytes */
            const i64 at = pages[i] >> 3;
            const unsigned shift = (unsigned)(pages[i] & 7);
            const unsigned char low = (unsigned char)(0xFFu << shift);
            const unsigned char high = (unsigned char)((1u << shift) - 1u);
            if ((o->bits[at] & low) != low || (shift && (o->bits[at + 1] & high) != high)) break;
            o->bits[at] &= (unsigned char)~low;
            if (shift) o->bits[at + 1] &= (unsigned char)~high;
            i += 8;
        } else {
            if (!is_owned(o, pages[i])) break;
            clear_owned(o, pages[i]);
            i++;
        }
    }
    if (i == count) return 0;
    for (i64 j = 0; j < i; j++) set_owned(o, pages[j]); /* exactly the bits cleared here */
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
