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

/* A new bytearray of n int64 values (uninitialised) and its data; NULL with an error set. */
PyObject *new_int64s(i64 n, i64 **data) {
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    if (out != NULL) *data = (i64 *)PyByteArray_AS_STRING(out);
    return out;
}
