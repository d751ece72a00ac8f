/* kvpool.impl._native: the CPU hot paths of kvpool.impl.native_ops as compiled loops.
 *
 * Every function takes int64 data as raw addresses (a CPU tensor's data_ptr(), checked
 * int64, contiguous and on the CPU by the Python caller), as a buffer (a numpy array), or (the
 * one-pass extend_take / decode_take, release and defer) as the tensors themselves, which it
 * checks the same way through torch's accessors (tensor_data). It gives exactly the numbers of
 * the numpy forms in kvpool.impl.backend / host_layout, wrap-around on int64 overflow included
 * (all value arithmetic is unsigned, as numpy's).
 * Nothing here keeps a pointer past the call. A layout that does not fit its counts returns
 * -1 and the caller takes the numpy / torch form, so both backends raise the same errors.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;
typedef uint64_t u64;

static inline i64 wrap_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
static inline i64 wrap_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
static inline i64 wrap_neg(i64 a) { return (i64)(0u - (u64)a); }

/* floor division / modulo by ps >= 1 (numpy's // and % for a positive divisor) */
static inline i64 div_floor(i64 a, i64 ps) {
    i64 q = a / ps;
    return (a % ps != 0 && a < 0) ? q - 1 : q;
}
static inline i64 mod_floor(i64 a, i64 ps) {
    i64 r = a % ps;
    return (r < 0) ? r + ps : r;
}

static int arg_ptr(PyObject *o, void **out) {
    *out = PyLong_AsVoidPtr(o);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}
static int arg_i64(PyObject *o, i64 *out) {
    *out = PyLong_AsLongLong(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}
/* a C-contiguous buffer of 8-byte items (a numpy int64 array); released by the caller */
static int arg_buf(PyObject *o, Py_buffer *b, int writable) {
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
static int arg_bufs(PyObject *in, Py_buffer *in_buf, PyObject *out, Py_buffer *out_buf) {
    if (arg_buf(in, in_buf, 0)) return -1;
    if (arg_buf(out, out_buf, 1)) {
        PyBuffer_Release(in_buf);
        return -1;
    }
    return 0;
}
static void release2(Py_buffer *a, Py_buffer *b) {
    PyBuffer_Release(a);
    PyBuffer_Release(b);
}
static int nargs_is(Py_ssize_t n, Py_ssize_t want, const char *name) {
    if (n == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, n);
    return -1;
}

/* dst[i] = first + i for i in [0, n), wrapping (one vectorisable loop; a whole page of the
 * common sizes as a fixed-length one, which the compiler unrolls) */
static inline void fill_run(i64 *restrict dst, i64 first, i64 n) {
    const u64 base = (u64)first;
    if (n == 16) {
        for (int i = 0; i < 16; i++) dst[i] = (i64)(base + (u64)i);
        return;
    }
    for (i64 i = 0; i < n; i++) dst[i] = (i64)(base + (u64)i);
}

/* Σ over requests of (seq + ps - 1) // ps - (pre + ps - 1) // ps, wrapped
 * (layout.new_pages_per_request summed) */
static i64 count_extend(const i64 *pre, const i64 *seq, i64 bs, i64 ps) {
    u64 total = 0;
    for (i64 r = 0; r < bs; r++)
        total += (u64)(div_floor(wrap_add(seq[r], ps - 1), ps) -
                       div_floor(wrap_add(pre[r], ps - 1), ps));
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

/* extend_count(pre, seq, bs, ps) -> count_extend */
static PyObject *extend_count(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *pp, *sp;
    i64 bs, ps;
    if (nargs_is(n, 4, "extend_count") || arg_ptr(args[0], &pp) || arg_ptr(args[1], &sp) ||
        arg_i64(args[2], &bs) || arg_i64(args[3], &ps))
        return NULL;
    return PyLong_FromLongLong(count_extend(pp, sp, bs, ps));
}

/* extend_layout(pre, seq, last, bs, new_pages, ps, out) -> lay_out_extend's 0 / -1, all of
 * new_pages taken and len(out) tokens */
static PyObject *extend_layout(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *pp, *sp, *lp;
    i64 bs, ps;
    Py_buffer pages_buf, out_buf;
    if (nargs_is(n, 7, "extend_layout") || arg_ptr(args[0], &pp) || arg_ptr(args[1], &sp) ||
        arg_ptr(args[2], &lp) || arg_i64(args[3], &bs) || arg_i64(args[5], &ps))
        return NULL;
    if (arg_bufs(args[4], &pages_buf, args[6], &out_buf)) return NULL;
    const int status = lay_out_extend(pp, sp, lp, bs, pages_buf.buf, pages_buf.len / 8, ps,
                                      out_buf.buf, out_buf.len / 8);
    release2(&pages_buf, &out_buf);
    return PyLong_FromLong(status);
}

/* Interned attribute names of the tensors the loops read (set at import). */
static PyObject *s_dtype, *s_is_cpu, *s_is_contiguous, *s_numel, *s_data_ptr;

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
static int torch_ready(void) {
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
static int tensor_data(PyObject *t, i64 *n, const i64 **data) {
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
static int tensor_or_same(PyObject *t, PyObject *same, const i64 *same_data, i64 *n,
                          const i64 **data) {
    if (t == same) {
        *data = same_data;
        return 1;
    }
    return tensor_data(t, n, data);
}

/* A new bytearray of n int64 values (uninitialised) and its data; NULL with an error set. */
static PyObject *new_int64s(i64 n, i64 **data) {
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
    if (out != NULL) *data = (i64 *)PyByteArray_AS_STRING(out);
    return out;
}

/* A loop's new bytearray of int64 slots (the reference passed on) as a new int64 tensor that
 * owns it: torch.frombuffer(out, dtype=torch.int64), or torch.empty(0, dtype=torch.int64) for
 * an empty one (which frombuffer refuses); NULL with an error set. After torch_ready. */
static PyObject *owned(PyObject *out) {
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
static PyObject *taken(PyObject *out, i64 top, i64 staged) {
    PyObject *tensor = owned(out);
    return tensor != NULL ? answer(tensor, top, staged) : NULL;
}

/* (answer, top, staged) for a take that hands out no tensor: answer None (short) or False
 * (a batch the loop found irregular: the caller's two-step form) */
static PyObject *untaken(PyObject *answer_, i64 top, i64 staged) {
    return answer(Py_NewRef(answer_), top, staged);
}

static int merge_in_front(i64 *buf, i64 len, i64 top, i64 base, i64 count, PyObject *runs);

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

/* extend_take(ps, free, top, staged, base, runs, pre, pre_cpu, seq, seq_cpu, last, num_tokens)
 *   -> (out, top, staged) | False | None
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
 * not take (another dtype, layout or device, lengths that disagree, num_tokens < 1, ps < 1, top
 * outside the list's buffer). */
static PyObject *extend_take(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *pcp, *scp, *pp, *sp, *lp;
    i64 top, ps, num_tokens, staged, base, bs = -1;
    Py_buffer free_buf;
    if (nargs_is(n, 12, "extend_take") || arg_i64(args[0], &ps) || arg_i64(args[2], &top) ||
        arg_i64(args[3], &staged) || arg_i64(args[4], &base) || arg_i64(args[11], &num_tokens))
        return NULL;
    if (num_tokens < 1 || ps < 1 || !tensor_data(args[9], &bs, &scp) ||
        !tensor_data(args[7], &bs, &pcp) || !tensor_or_same(args[6], args[7], pcp, &bs, &pp) ||
        !tensor_or_same(args[8], args[9], scp, &bs, &sp) || !tensor_data(args[10], &bs, &lp))
        Py_RETURN_NONE;
    const i64 count = count_extend(pcp, scp, bs, ps);
    if (count < 0) Py_RETURN_NONE;
    if (arg_buf(args[1], &free_buf, 1)) return NULL;
    i64 *free_pages = free_buf.buf;
    const i64 free_len = free_buf.len / 8;
    if (top < 0 || top > free_len) {
        PyBuffer_Release(&free_buf);
        Py_RETURN_NONE;
    }
    /* spec.layout.merge_bound */
    const int merged = merge_if_short(free_pages, free_len, &top, &staged, base, args[5],
                                      num_tokens / ps + bs + 1);
    PyObject *result = NULL;
    i64 *slots;
    if (merged == 0) {
        result = Py_NewRef(Py_False);
    } else if (merged > 0 && count > free_len - top) {
        result = untaken(Py_None, top, staged);
    } else if (merged > 0 && (result = new_int64s(num_tokens, &slots)) != NULL) {
        if (lay_out_extend(pp, sp, lp, bs, free_pages + top, count, ps, slots, num_tokens)) {
            Py_DECREF(result);
            result = untaken(Py_False, top, staged);
        } else {
            result = taken(result, top + count, staged);
        }
    }
    PyBuffer_Release(&free_buf);
    return result;
}

/* decode_count(seq, bs, ps) -> count_decode */
static PyObject *decode_count(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *sp;
    i64 bs, ps;
    if (nargs_is(n, 3, "decode_count") || arg_ptr(args[0], &sp) || arg_i64(args[1], &bs) ||
        arg_i64(args[2], &ps))
        return NULL;
    return PyLong_FromLongLong(count_decode(sp, bs, ps));
}

/* decode_layout(seq, last, new_pages, ps, out): lay_out_decode for len(out) requests */
static PyObject *decode_layout(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *sp, *lp;
    i64 ps;
    Py_buffer pages_buf, out_buf;
    if (nargs_is(n, 5, "decode_layout") || arg_ptr(args[0], &sp) || arg_ptr(args[1], &lp) ||
        arg_i64(args[3], &ps))
        return NULL;
    if (arg_bufs(args[2], &pages_buf, args[4], &out_buf)) return NULL;
    lay_out_decode(sp, lp, out_buf.len / 8, pages_buf.buf, pages_buf.len / 8, ps, out_buf.buf);
    release2(&pages_buf, &out_buf);
    Py_RETURN_NONE;
}

/* decode_take(ps, free, top, staged, base, runs, seq, seq_cpu, last)
 *   -> (out, top, staged) | False | None
 * alloc_decode in one pass, on the caller's tensors and free list as extend_take's (the merge
 * test: the batch outnumbers the list). The opening requests counted from the host lengths
 * (every request at ps 1); out None when they exceed the list, else a new int64 tensor of one
 * slot per request. None, nothing moved, for inputs the loops do not take and for an empty
 * batch. */
static PyObject *decode_take(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *scp, *sp, *lp;
    i64 top, ps, staged, base, bs = -1;
    Py_buffer free_buf;
    if (nargs_is(n, 9, "decode_take") || arg_i64(args[0], &ps) || arg_i64(args[2], &top) ||
        arg_i64(args[3], &staged) || arg_i64(args[4], &base))
        return NULL;
    if (ps < 1 || !tensor_data(args[7], &bs, &scp) || bs == 0 ||
        !tensor_or_same(args[6], args[7], scp, &bs, &sp) || !tensor_data(args[8], &bs, &lp))
        Py_RETURN_NONE;
    if (arg_buf(args[1], &free_buf, 1)) return NULL;
    i64 *free_pages = free_buf.buf;
    const i64 free_len = free_buf.len / 8;
    if (top < 0 || top > free_len) {
        PyBuffer_Release(&free_buf);
        Py_RETURN_NONE;
    }
    const int merged = merge_if_short(free_pages, free_len, &top, &staged, base, args[5], bs);
    const i64 count = ps == 1 ? bs : count_decode(scp, bs, ps);
    PyObject *result = NULL;
    i64 *slots;
    if (merged == 0) {
        result = Py_NewRef(Py_False);
    } else if (merged > 0 && count > free_len - top) {
        result = untaken(Py_None, top, staged);
    } else if (merged > 0 && (result = new_int64s(bs, &slots)) != NULL) {
        lay_out_decode(sp, lp, bs, free_pages + top, count, ps, slots);
        result = taken(result, top + count, staged);
    }
    PyBuffer_Release(&free_buf);
    return result;
}

/* out[i] = slots[i] // ps (floor) for i in [0, count) */
static void divide_into(i64 *restrict out, const i64 *restrict slots, i64 count, i64 ps) {
    if ((ps & (ps - 1)) == 0) {
        int shift = 0;
        while (((i64)1 << shift) < ps) shift++;
        for (i64 i = 0; i < count; i++) out[i] = slots[i] >> shift; /* arithmetic: floor */
    } else {
        for (i64 i = 0; i < count; i++) out[i] = div_floor(slots[i], ps);
    }
}

/* page_ids(slots, n, ps, out): out[i] = slots[i] // ps (floor) */
static PyObject *page_ids(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *sp;
    i64 count, ps;
    Py_buffer out_buf;
    if (nargs_is(n, 4, "page_ids") || arg_ptr(args[0], &sp) || arg_i64(args[1], &count) ||
        arg_i64(args[2], &ps))
        return NULL;
    if (arg_buf(args[3], &out_buf, 1)) return NULL;
    if (count > out_buf.len / 8) count = out_buf.len / 8;
    divide_into(out_buf.buf, sp, count, ps);
    PyBuffer_Release(&out_buf);
    Py_RETURN_NONE;
}

/* segment_page_ids(slots, n, ps, offset, out): the pages of a segment's n >= 1 slots whose
 * first slot sits at in-page offset 0 <= offset < ps: slots[0] // ps, then slots[i] // ps for
 * i = ps - offset, ps - offset + ps, ... < n, into out, which must hold exactly that many;
 * ValueError (nothing written) otherwise */
static PyObject *segment_page_ids(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *sp;
    i64 count, ps, offset;
    Py_buffer out_buf;
    if (nargs_is(n, 5, "segment_page_ids") || arg_ptr(args[0], &sp) ||
        arg_i64(args[1], &count) || arg_i64(args[2], &ps) || arg_i64(args[3], &offset))
        return NULL;
    if (arg_buf(args[4], &out_buf, 1)) return NULL;
    const i64 *slots = sp;
    i64 *out = out_buf.buf;
    const i64 first = ps - offset;
    const int fits = count >= 1 && ps >= 1 && offset >= 0 && offset < ps &&
                     out_buf.len / 8 == 1 + (count > first ? (count - first + ps - 1) / ps : 0);
    if (fits) {
        i64 k = 0;
        out[k++] = div_floor(slots[0], ps);
        for (i64 i = first; i < count; i += ps) out[k++] = div_floor(slots[i], ps);
    }
    PyBuffer_Release(&out_buf);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "segment_page_ids: arguments out of range");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* write_at(buf, start, src, n): buf[start : start + n] = the n int64 values at address src;
 * ValueError (nothing written) when that span is not inside buf */
static PyObject *write_at(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    void *sp;
    i64 start, count;
    Py_buffer b;
    if (nargs_is(n, 4, "write_at") || arg_i64(args[1], &start) || arg_ptr(args[2], &sp) ||
        arg_i64(args[3], &count))
        return NULL;
    if (arg_buf(args[0], &b, 1)) return NULL;
    const i64 len = b.len / 8;
    if (start < 0 || count < 0 || count > len - start) {
        PyBuffer_Release(&b);
        PyErr_Format(PyExc_ValueError, "write_at: [%lld, %lld + %lld) is outside a buffer of %lld",
                     (long long)start, (long long)start, (long long)count, (long long)len);
        return NULL;
    }
    memmove((i64 *)b.buf + start, sp, (size_t)count * sizeof(i64));
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

/* copy_into(buf, start, src): buf[start : start + len(src)] = src (int64 buffers);
 * ValueError (nothing written) when that span is not inside buf */
static PyObject *copy_into(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    i64 start;
    Py_buffer src, b;
    if (nargs_is(n, 3, "copy_into") || arg_i64(args[1], &start)) return NULL;
    if (arg_bufs(args[2], &src, args[0], &b)) return NULL;
    const i64 len = b.len / 8, count = src.len / 8;
    const int inside = start >= 0 && count <= len - start;
    if (inside) memmove((i64 *)b.buf + start, src.buf, (size_t)count * sizeof(i64));
    release2(&src, &b);
    if (!inside) {
        PyErr_Format(PyExc_ValueError, "copy_into: [%lld, %lld + %lld) is outside a buffer of %lld",
                     (long long)start, (long long)start, (long long)count, (long long)len);
        return NULL;
    }
    Py_RETURN_NONE;
}

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
static void insertion_sort(i64 *p, i64 lo, i64 hi) {
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
#define SMALL_SORT 64
static PyObject *distinct_runs(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
static PyObject *merge_below(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
 * contiguous CPU tensor; None for any other (the caller's numpy form copies it). */
static PyObject *defer(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *slots;
    i64 ps, count = -1;
    if (nargs_is(n, 2, "defer") || arg_i64(args[1], &ps)) return NULL;
    if (ps < 1) {
        PyErr_SetString(PyExc_ValueError, "defer: page size must be >= 1");
        return NULL;
    }
    if (!tensor_data(args[0], &count, &slots)) Py_RETURN_NONE;
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

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address, write) __builtin_prefetch((address), (write), 3)
#else
#define PREFETCH(address, write) ((void)(address))
#endif

/* out[0, n) = src[0, n), with a request for each 64-byte line of buf[next, next + n) modulo
 * len (for a store when write) issued between the line copies. The token ring's entries are
 * handed out at its head and given back at its tail in order, so the next call reads or writes
 * just past where this one stopped, and at 10^6 pages those lines are long cold (prefetches
 * issued in one burst are mostly dropped, hence one per copied line). */
static void copy_prefetching(i64 *restrict out, const i64 *restrict src, i64 n, const i64 *buf,
                             i64 len, i64 next, int write) {
    next = next >= len ? next - len : next;
    const i64 ahead_first = n < len - next ? n : len - next;
    i64 i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(out + i, src + i, 8 * sizeof(i64));
        const i64 *ahead = buf + (i < ahead_first ? next + i : i - ahead_first);
        if (write) PREFETCH(ahead, 1); else PREFETCH(ahead, 0);
    }
    memcpy(out + i, src + i, (size_t)(n - i) * sizeof(i64));
}

/* src[0, k) into dst[start, start + k) modulo len (0 <= start < len, k <= len); forwards: the
 * lines of the k entries after them requested for the next write (copy_prefetching) */
static void write_wrapped(i64 *dst, i64 len, i64 start, const i64 *src, i64 k, int forwards) {
    const i64 first = k < len - start ? k : len - start;
    if (forwards)
        copy_prefetching(dst + start, src, first, dst, len, start + k, 1);
    else
        memcpy(dst + start, src, (size_t)first * sizeof(i64));
    memcpy(dst, src + first, (size_t)(k - first) * sizeof(i64));
}

/* release(ps, source, dedup, buf, at, backwards, room) -> k | -1 - k | None
 * (NativeOps.release: this function with ps bound)
 * A release into a free list's buffer in one pass. source: an int64, contiguous CPU tensor of
 * slots (its pages: slots // ps) or a list of bytearrays of int64 page ids end to end (what
 * defer returns). dedup: the sorted distinct pages, else all of them in order. The k pages go
 * to buf[at, at + k) (backwards: buf[at - k, at)) modulo len(buf); -1 - k, nothing written,
 * when k > room; None, nothing written, for a tensor the loops do not read, a list item that is
 * not a bytearray of whole int64s, or more than MERGE_SORT distinct pages out of order (the
 * caller's numpy form releases those). ValueError when at is outside [0, len(buf)] or k >
 * len(buf) (nothing written). */
#define LOCAL_PAGES 512
static PyObject *release(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    i64 ps, at, room, k = -1;
    const i64 *slots = NULL;
    if (nargs_is(n, 7, "release") || arg_i64(args[0], &ps) || arg_i64(args[4], &at) ||
        arg_i64(args[6], &room))
        return NULL;
    const int dedup = PyObject_IsTrue(args[2]), backwards = PyObject_IsTrue(args[5]);
    if (dedup < 0 || backwards < 0) return NULL;
    if (ps < 1) {
        PyErr_SetString(PyExc_ValueError, "release: page size must be >= 1");
        return NULL;
    }
    PyObject *source = args[1];
    const int listed = PyList_Check(source);
    if (listed ? !gather_parts(source, NULL, &k) : !tensor_data(source, &k, &slots))
        Py_RETURN_NONE;
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
        Py_buffer b;
        if (arg_buf(args[3], &b, 1) == 0) {
            const i64 len = b.len / 8;
            if (at < 0 || at > len || k > len) {
                PyErr_Format(PyExc_ValueError, "release: %lld pages at %lld do not fit a "
                             "buffer of %lld", (long long)k, (long long)at, (long long)len);
            } else {
                const i64 start = backwards ? (at - k < 0 ? at - k + len : at - k) : at;
                if (k > 0) write_wrapped(b.buf, len, start == len ? 0 : start, pages, k, !backwards);
                result = PyLong_FromLongLong(k);
            }
            PyBuffer_Release(&b);
        }
    }
    if (pages != local) free(pages);
    return result;
}

/* slots_at(ps, buf, start, num_pages) -> tensor: every slot of the pages
 * buf[start, start + num_pages) modulo len(buf), page-major (page * ps + i, wrapping), as a
 * new int64 tensor (owning the bytearray filled; NativeOps.take_slots: this function with ps
 * bound); ValueError (nothing read) when start is outside [0, len(buf)) with pages to take,
 * num_pages is negative or more than len(buf), or ps < 1 */
static PyObject *slots_at(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    i64 start, num_pages, ps;
    Py_buffer b;
    if (nargs_is(n, 4, "slots_at") || arg_i64(args[0], &ps) || arg_i64(args[2], &start) ||
        arg_i64(args[3], &num_pages) || torch_ready() < 0)
        return NULL;
    if (arg_buf(args[1], &b, 0)) return NULL;
    const i64 len = b.len / 8;
    const int inside = ps >= 1 && num_pages >= 0 && num_pages <= len &&
                       (num_pages == 0 || (start >= 0 && start < len));
    i64 *out = NULL;
    PyObject *slots = inside ? new_int64s(num_pages * ps, &out) : NULL;
    if (slots != NULL) {
        const i64 *pages = b.buf;
        const i64 first = num_pages == 0 ? 0 : num_pages < len - start ? num_pages : len - start;
        if (ps == 1) {
            copy_prefetching(out, pages + start, first, pages, len, start + num_pages, 0);
            memcpy(out + first, pages, (size_t)(num_pages - first) * sizeof(i64));
        } else {
            for (i64 i = 0; i < num_pages; i++)
                fill_run(out + i * ps, wrap_mul(pages[i < first ? start + i : i - first], ps), ps);
        }
    }
    PyBuffer_Release(&b);
    if (!inside)
        PyErr_Format(PyExc_ValueError, "slots_at: %lld pages of %lld slots at %lld do not fit "
                     "a buffer of %lld", (long long)num_pages, (long long)ps, (long long)start,
                     (long long)len);
    return slots != NULL ? owned(slots) : NULL;
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
static PyObject *sort_values(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
static int merge_in_front(i64 *buf, i64 len, i64 top, i64 base, i64 count, PyObject *runs) {
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
static PyObject *merge_front(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    Py_buffer b;
    i64 top, base, count;
    if (nargs_is(n, 5, "merge_front") || arg_i64(args[1], &top) || arg_i64(args[2], &base) ||
        arg_i64(args[3], &count) || arg_buf(args[0], &b, 1))
        return NULL;
    const i64 len = b.len / 8;
    int done = -1;
    if (base < 0 || count < 0 || base + count > top || top > len)
        PyErr_SetString(PyExc_ValueError, "merge_front: staged pages not clear of the list");
    else
        done = merge_in_front(b.buf, len, top, base, count, args[4]);
    PyBuffer_Release(&b);
    return done < 0 ? NULL : PyBool_FromLong(done);
}

#define FAST(name) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {
    FAST(extend_count), FAST(extend_layout), FAST(decode_count), FAST(decode_layout),
    FAST(page_ids),     FAST(distinct_runs), FAST(merge_below),  FAST(write_at),
    FAST(extend_take),  FAST(decode_take),   FAST(copy_into),    FAST(segment_page_ids),
    FAST(defer),        FAST(release),       FAST(slots_at),     FAST(sort_values),
    FAST(merge_front),
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "kvpool's compiled CPU hot paths", -1, methods,
                                    NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit__native(void) {
    s_dtype = PyUnicode_InternFromString("dtype");
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_numel = PyUnicode_InternFromString("numel");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!s_dtype || !s_is_cpu || !s_is_contiguous || !s_numel || !s_data_ptr)
        return NULL;
    return PyModule_Create(&module);
}
