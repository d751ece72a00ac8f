/* The tensors the compiled functions read and the ones they return: torch's objects looked up
 * once, a tensor's int64 data through torch's accessors, a filled bytearray as a tensor, the
 * one-pass takes' answers. */
#include "native.h"

/* Interned attribute names of the tensors the loops read (tensors_init, at import). */
static PyObject *s_dtype, *s_is_cpu, *s_is_contiguous, *s_numel, *s_data_ptr;

/* 0 once the names are interned; -1 with an error set */
int tensors_init(void) {
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
 * takes them as a dict, built here once rather than per call), and torch.Tensor with the
 * accessors its instances' reads resolve to: the getters of dtype and is_cpu and the method
 * descriptors of is_contiguous(), numel() and data_ptr(). A tensor of exactly that type is read
 * through them directly (no attribute lookup, no probe of the instance's __dict__); any other
 * object, or every object when torch's types are not as expected, through its attributes. */
static PyObject *int64_dtype, *frombuffer, *empty, *dtype_kwargs;
static PyTypeObject *tensor_type;
static PyGetSetDef *get_dtype, *get_is_cpu;
static PyObject *call_is_contiguous, *call_numel, *call_data_ptr;

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

/* 0 once torch's objects are looked up; -1 with an error set when torch, its int64, frombuffer
 * or empty cannot be had (a missing direct accessor only leaves the attribute reads). */
int torch_ready(void) {
    if (frombuffer != NULL) return 0;
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL) return -1;
    PyObject *type = PyObject_GetAttrString(torch, "Tensor");
    PyObject *int64 = PyObject_GetAttrString(torch, "int64");
    PyObject *from = PyObject_GetAttrString(torch, "frombuffer");
    PyObject *empty_ = PyObject_GetAttrString(torch, "empty");
    Py_DECREF(torch);
    PyObject *kwargs = int64 != NULL ? PyDict_New() : NULL;
    if (kwargs != NULL && PyDict_SetItem(kwargs, s_dtype, int64) < 0) Py_CLEAR(kwargs);
    if (type == NULL || int64 == NULL || from == NULL || empty_ == NULL || kwargs == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(int64);
        Py_XDECREF(from);
        Py_XDECREF(empty_);
        Py_XDECREF(kwargs);
        return -1;
    }
    if (PyType_Check(type)) {
        get_dtype = getter_of(type, s_dtype);
        get_is_cpu = getter_of(type, s_is_cpu);
        call_is_contiguous = method_of(type, s_is_contiguous);
        call_numel = method_of(type, s_numel);
        call_data_ptr = method_of(type, s_data_ptr);
        PyErr_Clear();
        if (get_dtype && get_is_cpu && call_is_contiguous && call_numel && call_data_ptr)
            tensor_type = (PyTypeObject *)Py_NewRef(type);
    }
    Py_DECREF(type);
    int64_dtype = int64;
    dtype_kwargs = kwargs;
    empty = empty_;
    frombuffer = from;
    return 0;
}

/* t.<getter>: directly for an exact torch.Tensor (new reference; NULL with an error set) */
static inline PyObject *read_attr(PyObject *t, int exact, PyGetSetDef *g, PyObject *name) {
    return exact ? g->get(t, g->closure) : PyObject_GetAttr(t, name);
}
/* t.<method>() as read_attr */
static inline PyObject *call_method(PyObject *t, int exact, PyObject *m, PyObject *name) {
    return exact ? PyObject_Vectorcall(m, &t, 1, NULL) : PyObject_CallMethodNoArgs(t, name);
}

/* A tensor's int64 data: 1 with *data set when ``t`` is an int64, contiguous CPU tensor of
 * *n values (*n < 0: of any length, which is stored), else 0 with no error set (a tensor the
 * loops do not read, or not a tensor: the caller's numpy form takes it). */
int tensor_data(PyObject *t, i64 *n, const i64 **data) {
    if (torch_ready() < 0) {
        PyErr_Clear();
        return 0;
    }
    const int exact = tensor_type != NULL && Py_IS_TYPE(t, tensor_type);
    PyObject *v = read_attr(t, exact, get_dtype, s_dtype);
    int ok = v != NULL && v == int64_dtype;
    Py_XDECREF(v);
    if (ok) {
        v = read_attr(t, exact, get_is_cpu, s_is_cpu);
        ok = v == Py_True;
        Py_XDECREF(v);
    }
    if (ok) {
        v = call_method(t, exact, call_is_contiguous, s_is_contiguous);
        ok = v == Py_True;
        Py_XDECREF(v);
    }
    if (ok) {
        v = call_method(t, exact, call_numel, s_numel);
        const i64 m = v != NULL ? PyLong_AsLongLong(v) : -1;
        Py_XDECREF(v);
        ok = m >= 0 && (*n < 0 || m == *n);
        if (ok) *n = m;
    }
    if (ok) {
        v = call_method(t, exact, call_data_ptr, s_data_ptr);
        *data = v != NULL ? PyLong_AsVoidPtr(v) : NULL;
        ok = v != NULL && !PyErr_Occurred();
        Py_XDECREF(v);
    }
    if (!ok) PyErr_Clear();
    return ok;
}

/* The data of tensor ``t`` of *n values: that of ``same`` when it is the very same object
 * (a length passed as both the host and the device tensor is read once). */
int tensor_or_same(PyObject *t, PyObject *same, const i64 *same_data, i64 *n,
                   const i64 **data) {
    if (t == same) {
        *data = same_data;
        return 1;
    }
    return tensor_data(t, n, data);
}

/* A loop's new bytearray of int64 slots (the reference passed on) as a new int64 tensor that
 * owns it: torch.frombuffer(out, dtype=torch.int64), or torch.empty(0, dtype=torch.int64) for
 * an empty one (which frombuffer refuses); NULL with an error set. After torch_ready. */
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
