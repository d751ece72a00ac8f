/* The tensors the compiled functions read and the ones they return: torch's objects looked up
 * once, a tensor's int64 data through torch's accessors, a filled bytearray as a tensor, the
 * one-pass takes' answers. */
#include "native.h"

/* Interned attribute names of the tensors the loops read (tensors_init, at import). */
static PyObject *s_dtype, *s_is_cpu, *s_is_contiguous, *s_numel, *s_data_ptr;

/* 0 once the names are interned; -1 with an error set */
int tensors_init(void) {
    if (s_dtype && s_is_cpu && s_is_contiguous && s_numel && s_data_ptr) return 0; /* once */
    s_dtype = PyUnicode_InternFromString("dtype");
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_numel = PyUnicode_InternFromString("numel");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    return (s_dtype && s_is_cpu && s_is_contiguous && s_numel && s_data_ptr) ? 0 : -1;
}

/* From torch, looked up once (torch_ready: at the first tensor read or result, when torch is
 * imported as the caller passed tensors or will get them): torch.int64, torch.frombuffer,
 * torch.empty, {"dtype": torch.int64} (the keyword arguments of both: a METH_KEYWORDS function
 * takes them as a dict, built here once rather than per call), torch.Tensor with the accessors
 * its instances' reads resolve to (the getters of dtype and is_cpu and the method descriptors
 * of is_contiguous(), numel() and data_ptr()), and torch._C._is_torch_function_mode_enabled.
 * Only an object of exactly type torch.Tensor is read in place, through those accessors, and
 * only while no torch function mode is active (a mode could answer any of the reads): a
 * subclass, any other object, or any object when torch's types are not as expected, is left to
 * the caller's numpy form, which reads values, never addresses. */
static PyObject *int64_dtype, *frombuffer, *empty, *dtype_kwargs;
static PyTypeObject *tensor_type;
static PyGetSetDef *get_dtype, *get_is_cpu;
static PyObject *call_is_contiguous, *call_numel, *call_data_ptr, *mode_enabled;

static PyGetSetDef *getter_of(PyObject *type, PyObject *name) {
    PyObject *d = PyObject_GetAttr(type, name);
    PyGetSetDef *g = d != NULL && Py_IS_TYPE(d, &PyGetSetDescr_Type)
                         ? ((PyGetSetDescrObject *)d)->d_getset : NULL;
    Py_XDECREF(d);  /* the type keeps its descriptor, and the descriptor its PyGetSetDef */
    return g;
}
static PyObject *method_of(PyObject *type, PyObject *name) {
    PyObject *d = PyObject_GetAttr(type, name);
    if (d != NULL && Py_IS_TYPE(d, &PyMethodDescr_Type)) return d;
    Py_XDECREF(d);
    return NULL;
}

/* After a failed lookup or read: 0 with the error cleared when it only says "not this object"
 * (AttributeError, TypeError, ValueError, RuntimeError: torch's answers for tensors without
 * data, lookups torch does not offer), else -1 with it kept (MemoryError, KeyboardInterrupt,
 * SystemExit, anything else: they propagate). */
static int clear_expected(void) {
    if (!PyErr_Occurred()) return 0;
    if (PyErr_ExceptionMatches(PyExc_AttributeError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
        PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* 0 once torch's objects are looked up; -1 with an error set when torch, its int64, frombuffer
 * or empty cannot be had (a missing accessor or mode test only leaves tensors unread). */
int torch_ready(void) {
    if (frombuffer != NULL) return 0;
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL) return -1;
    PyObject *type = PyObject_GetAttrString(torch, "Tensor");
    PyObject *int64 = PyObject_GetAttrString(torch, "int64");
    PyObject *from = PyObject_GetAttrString(torch, "frombuffer");
    PyObject *empty_ = PyObject_GetAttrString(torch, "empty");
    PyObject *c = PyObject_GetAttrString(torch, "_C");
    Py_DECREF(torch);
    PyObject *mode = c != NULL ? PyObject_GetAttrString(c, "_is_torch_function_mode_enabled")
                               : NULL;
    Py_XDECREF(c);
    if (mode == NULL && clear_expected() < 0) mode = NULL;
    PyObject *kwargs = int64 != NULL ? PyDict_New() : NULL;
    if (kwargs != NULL && PyDict_SetItem(kwargs, s_dtype, int64) < 0) Py_CLEAR(kwargs);
    if (type == NULL || int64 == NULL || from == NULL || empty_ == NULL || kwargs == NULL ||
        PyErr_Occurred()) {
        Py_XDECREF(type);
        Py_XDECREF(int64);
        Py_XDECREF(from);
        Py_XDECREF(empty_);
        Py_XDECREF(kwargs);
        Py_XDECREF(mode);
        return -1;
    }
    if (PyType_Check(type) && mode != NULL && PyCFunction_Check(mode) &&
        (PyCFunction_GET_FLAGS(mode) & METH_NOARGS)) {
        get_dtype = getter_of(type, s_dtype);
        get_is_cpu = getter_of(type, s_is_cpu);
        call_is_contiguous = method_of(type, s_is_contiguous);
        call_numel = method_of(type, s_numel);
        call_data_ptr = method_of(type, s_data_ptr);
        if (clear_expected() < 0) {
            Py_DECREF(type);
            Py_DECREF(int64);
            Py_DECREF(from);
            Py_DECREF(empty_);
            Py_DECREF(kwargs);
            Py_DECREF(mode);
            return -1;
        }
        if (get_dtype && get_is_cpu && call_is_contiguous && call_numel && call_data_ptr) {
            tensor_type = (PyTypeObject *)Py_NewRef(type);
            mode_enabled = Py_NewRef(mode);
        }
    }
    Py_DECREF(type);
    Py_XDECREF(mode);
    int64_dtype = int64;
    dtype_kwargs = kwargs;
    empty = empty_;
    frombuffer = from;
    return 0;
}

/* 1 when tensors may be read in place now (torch's accessors known, no torch function mode
 * active), 0 when not, -1 with an error set. Called once per compiled call that reads tensors. */
int may_read_tensors(void) {
    if (torch_ready() < 0) return clear_expected() < 0 ? -1 : 0;
    if (tensor_type == NULL) return 0;
    PyObject *on = PyCFunction_GET_FUNCTION(mode_enabled)(PyCFunction_GET_SELF(mode_enabled), NULL);
    if (on == NULL) return clear_expected() < 0 ? -1 : 0;
    const int off = on == Py_False;
    Py_DECREF(on);
    return off;
}

/* None for an input the loops do not read (no error set), NULL when an error is set. */
PyObject *not_taken(void) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* A tensor's int64 data, after may_read_tensors said 1: 1 with *data set when ``t`` is a
 * torch.Tensor (exactly that type) holding *n int64 values contiguously on the CPU (*n < 0: of
 * any length, which is stored); 0 with no error set when it is anything else (the caller's
 * numpy form takes it); -1 with an error set for an error that must propagate. */
int tensor_data(PyObject *t, i64 *n, const i64 **data) {
    if (!Py_IS_TYPE(t, tensor_type)) return 0;
    PyObject *v = get_dtype->get(t, get_dtype->closure);
    int ok = v != NULL && v == int64_dtype;
    Py_XDECREF(v);
    if (ok) {
        v = get_is_cpu->get(t, get_is_cpu->closure);
        ok = v == Py_True;
        Py_XDECREF(v);
    }
    if (ok) {
        v = PyObject_Vectorcall(call_is_contiguous, &t, 1, NULL);
        ok = v == Py_True;
        Py_XDECREF(v);
    }
    if (ok) {
        v = PyObject_Vectorcall(call_numel, &t, 1, NULL);
        const i64 m = v != NULL && PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;
        Py_XDECREF(v);
        ok = m >= 0 && m <= PY_SSIZE_T_MAX / 8 && (*n < 0 || m == *n);
        if (ok) *n = m;
    }
    if (ok) {
        v = PyObject_Vectorcall(call_data_ptr, &t, 1, NULL);
        *data = v != NULL && PyLong_Check(v) ? PyLong_AsVoidPtr(v) : NULL;
        ok = v != NULL && !PyErr_Occurred() && (*data != NULL || *n == 0);
        Py_XDECREF(v);
    }
    if (!ok) return clear_expected() < 0 ? -1 : 0;
    return 1;
}

/* The data of tensor ``t`` of *n values: that of ``same`` when it is the very same object
 * (a length passed as both the host and the device tensor is read once); as tensor_data. */
int tensor_or_same(PyObject *t, PyObject *same, const i64 *same_data, i64 *n,
                   const i64 **data) {
    if (t == same) {
        *data = same_data;
        return 1;
    }
    return tensor_data(t, n, data);
}

/* A loop's new bytearray of int64 slots, every value written (the reference passed on), as a
 * new int64 tensor that owns it: torch.frombuffer(out, dtype=torch.int64), or
 * torch.empty(0, dtype=torch.int64) for an empty one (which frombuffer refuses); NULL with an
 * error set. After torch_ready. */
PyObject *owned(PyObject *out) {
    const int filled = PyByteArray_GET_SIZE(out) > 0;
    PyObject *args = filled ? PyTuple_Pack(1, out) : Py_BuildValue("(i)", 0);
    Py_DECREF(out);
    PyObject *tensor =
        args != NULL ? PyObject_Call(filled ? frombuffer : empty, args, dtype_kwargs) : NULL;
    Py_XDECREF(args);
    return tensor;
}
/* (slots, top, staged), the reference to slots passed on; NULL with an error set */
static PyObject *answer(PyObject *slots, i64 top, i64 staged) {
    PyObject *t = PyTuple_New(3), *a = PyLong_FromLongLong(top),
             *b = PyLong_FromLongLong(staged);
    if (t == NULL || a == NULL || b == NULL) {
        Py_XDECREF(t);
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_DECREF(slots);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, slots);
    PyTuple_SET_ITEM(t, 1, a);
    PyTuple_SET_ITEM(t, 2, b);
    return t;
}

/* The answer of a take that laid out pages into ``out`` (a non-empty bytearray, the reference
 * passed on): (torch.frombuffer(out, dtype=int64), top, staged), the list's and the
 * staging's counters after it; NULL with an error set. */
PyObject *taken(PyObject *out, i64 top, i64 staged) {
    PyObject *tensor = owned(out);
    return tensor != NULL ? answer(tensor, top, staged) : NULL;
}

/* (answer, top, staged) for a take that hands out no tensor: answer None (short) or False
 * (a batch the loop found irregular: the caller's two-step form) */
PyObject *untaken(PyObject *answer_, i64 top, i64 staged) {
    return answer(Py_NewRef(answer_), top, staged);
}
