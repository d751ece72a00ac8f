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
 * Owners; released by the caller */
int arg_owners(PyObject *o, Py_buffer *b, Owners *out) {
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

/* The release side of the guard: clear the bits of pages[0, count), each of which must be set
 * (a page handed out, named once here): 0; -1 when one is not, every bit as it was before. */
int claim_pages(Owners *o, const i64 *pages, i64 count) {
    for (i64 i = 0; i < count; i++) {
        if (!is_owned(o, pages[i])) {
            for (i64 j = 0; j < i; j++) set_owned(o, pages[j]);
            return -1;
        }
        clear_owned(o, pages[i]);
    }
    return 0;
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
