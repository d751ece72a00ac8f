/* kvpool.impl._native: the CPU hot paths of kvpool.impl.native_ops as compiled loops.
 * This header holds what its files share; module.c lists the functions Python calls.
 *
 * Every function takes int64 data as a buffer (a numpy array, C-contiguous with an int64 item
 * format: arg_buf) or as the tensors themselves, which it checks through torch's accessors
 * (tensor_data): never as an address. A tensor it does not read (another type, dtype, layout
 * or device) gives None with nothing written, and the caller's numpy form takes it. Every page
 * size is checked >= 1 before any division (arg_page_size: ValueError naming ps). It gives
 * exactly the numbers of the numpy forms in kvpool.impl.backend / host_layout, wrap-around on
 * int64 overflow included (all value arithmetic is unsigned, as numpy's).
 * Nothing here keeps a pointer past the call. A layout that does not fit its counts gives
 * False (-1 inside) and the caller takes the numpy / torch form, so both backends raise the
 * same errors.
 *
 * Memory safety does not depend on the caller: only an exact torch.Tensor is read in place
 * (its dtype, contiguity and length through torch's own accessors, and only while no torch
 * function mode could answer for it), every size and position from caller values is checked
 * against the buffer or tensor it indexes before anything is read or written there (a wrong
 * one raises ValueError), and a result is built only once every one of its values is written.
 * Errors other than "this object is not one the loops read" (MemoryError, KeyboardInterrupt,
 * ...) propagate.
 *
 * The ownership guard (kvpool.impl.ownership): one bit per page, set while the page is handed
 * out. The one-pass takes set the bits of the pages they hand out and refuse (None, nothing
 * moved) a last_loc on a page whose bit is clear; the one-pass release clears the bits of the
 * pages it puts back and refuses (None, nothing moved) one whose bit is already clear. The
 * caller's Python form then raises the clause (ContractViolation).
 */
#ifndef KVPOOL_NATIVE_H
#define KVPOOL_NATIVE_H

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

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address, write) __builtin_prefetch((address), (write), 3)
#else
#define PREFETCH(address, write) ((void)(address))
#endif

/* The ownership bitmap: bit p of bits[0, num_bits / 8) is page p's (page 0's is never set);
 * bits NULL: no guard (every page passes, nothing is marked). */
typedef struct {
    unsigned char *bits;
    i64 num_bits;
} Owners;
static inline int is_owned(const Owners *o, i64 page) {
    if (o->bits == NULL) return 1; /* no guard (owners None) */
    return page >= 0 && page < o->num_bits && ((o->bits[page >> 3] >> (page & 7)) & 1);
}
/* (a page outside the bitmap, which no free list holds, is never marked: memory stays safe) */
static inline void set_owned(Owners *o, i64 page) {
    if (page >= 0 && page < o->num_bits) o->bits[page >> 3] |= (unsigned char)(1u << (page & 7));
}

/* up to this many values, sorts are insertion sorts (dedup.c, merge.c) */
#define SMALL_SORT 64

/* A function Python calls (METH_FASTCALL; module.c's table). */
#define NATIVE_FN(name) PyObject *name(PyObject *self, PyObject *const *args, Py_ssize_t n)

/* args.c: 0, or -1 with an error set */
int arg_i64(PyObject *o, i64 *out);
int arg_i64_fits(PyObject *o, i64 *out);
int arg_page_size(PyObject *o, const char *fn, i64 *ps);
int arg_buf(PyObject *o, Py_buffer *b, int writable);
int arg_owners(PyObject *o, Py_buffer *b, Owners *out);
int claim_pages(Owners *o, const i64 *pages, i64 count);
void mark_taken(Owners *o, const i64 *pages, i64 count, int ascending);
int arg_bufs(PyObject *in, Py_buffer *in_buf, PyObject *out, Py_buffer *out_buf);
void release2(Py_buffer *a, Py_buffer *b);
int nargs_is(Py_ssize_t n, Py_ssize_t want, const char *name);
PyObject *new_int64s(i64 n, i64 **data);
int checked_mul(i64 a, i64 b, i64 *out);

/* tensors.c */
int tensors_init(void);
int torch_ready(void);
int tensor_data(PyObject *t, i64 *n, const i64 **data);
int tensor_or_same(PyObject *t, PyObject *same, const i64 *same_data, i64 *n,
                   const i64 **data);
PyObject *not_taken(void);
int may_read_tensors(void);
PyObject *owned(PyObject *out);
PyObject *taken(PyObject *out, i64 top, i64 staged);
PyObject *untaken(PyObject *answer_, i64 top, i64 staged);

/* pages.c */
void divide_into(i64 *restrict out, const i64 *restrict slots, i64 count, i64 ps);
void write_wrapped(i64 *dst, i64 len, i64 start, const i64 *src, i64 k, int forwards);
NATIVE_FN(page_ids);
NATIVE_FN(segment_page_ids);
NATIVE_FN(write_at);
NATIVE_FN(copy_into);
NATIVE_FN(slots_at);

/* dedup.c */
void insertion_sort(i64 *p, i64 lo, i64 hi);
NATIVE_FN(distinct_runs);
NATIVE_FN(defer);
NATIVE_FN(release);

/* merge.c */
int merge_in_front(i64 *buf, i64 len, i64 top, i64 base, i64 count, PyObject *runs);
NATIVE_FN(merge_below);
NATIVE_FN(sort_values);
NATIVE_FN(merge_front);
NATIVE_FN(ascends_across);

/* layout.c */
NATIVE_FN(extend_count);
NATIVE_FN(extend_layout);
NATIVE_FN(decode_count);
NATIVE_FN(decode_layout);
NATIVE_FN(extend_take);
NATIVE_FN(decode_take);

#endif
