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

/* 1 when p[0, 8) are the consecutive pages p[0], p[0] + 1, ..., all inside the bitmap: their
 * bits are then bit (p[0] & 7) on of byte p[0] >> 3 and the bits below it of the next byte */
static inline int run_of_8(const Owners *o, const i64 *p) {
    int run = p[0] >= 0 && p[0] < o->num_bits - 7;
    for (int k = 1; k < 8; k++) run &= (u64)p[k] == (u64)p[0] + (u64)k;
    return run;
}

/* The take side of the guard: set the bits of pages[0, count) (pages from a free list; eight
 * consecutive ones, the common case, by two byte writes) */
void mark_taken(Owners *o, const i64 *pages, i64 count) {
    if (o->bits == NULL) return;
    i64 i = 0;
    for (; i + 8 <= count; i += 8) {
        if (run_of_8(o, pages + i)) {
            const i64 at = pages[i] >> 3;
            const unsigned shift = (unsigned)(pages[i] & 7);
            o->bits[at] |= (unsigned char)(0xFFu << shift);
            if (shift) o->bits[at + 1] |= (unsigned char)(0xFFu >> (8 - shift));
        } else {
            for (int k = 0; k < 8; k++) set_owned(o, pages[i + k]);
        }
    }
    for (; i < count; i++) set_owned(o, pages[i]);
}

/* The release side of the guard: clear the bits of pages[0, count), each of which must be set
 * (a page handed out, named once here): 0; -1 when one is not, every bit as it was before. */
int claim_pages(Owners *o, const i64 *pages, i64 count) {
    if (o->bits == NULL) return 0;
    i64 i = 0;
    while (i < count) {
        if (i + 8 <= count && run_of_8(o, pages + i)) {
            const i64 at = pages[i] >> 3;
            const unsigned shift = (unsigned)(pages[i] & 7);
            const unsigned char low = (unsigned char)(0xFFu << shift);
            const unsigned char high = shift ? (unsigned char)(0xFFu >> (8 - shift)) : 0;
            /* byte at + 1 is inside the bitmap only when shift > 0 (page + 7 lies in it) */
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
