/* Page ids of slots, segment representatives, writes and copies into a free list's buffer
 * (wrapping), and alloc's slots of the pages at a position. */
#include "native.h"

/* out[i] = slots[i] // ps (floor) for i in [0, count) */
void divide_into(i64 *restrict out, const i64 *restrict slots, i64 count, i64 ps) {
    if ((ps & (ps - 1)) == 0) {
        int shift = 0;
        while (((i64)1 << shift) < ps) shift++;
        for (i64 i = 0; i < count; i++) out[i] = slots[i] >> shift; /* arithmetic: floor */
    } else {
        for (i64 i = 0; i < count; i++) out[i] = div_floor(slots[i], ps);
    }
}

/* page_ids(slots, n, ps, out): out[i] = slots[i] // ps (floor) */
PyObject *page_ids(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
PyObject *segment_page_ids(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
PyObject *write_at(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
PyObject *copy_into(PyObject *self, PyObject *const *args, Py_ssize_t n) {
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
void write_wrapped(i64 *dst, i64 len, i64 start, const i64 *src, i64 k, int forwards) {
    const i64 first = k < len - start ? k : len - start;
    if (forwards)
        copy_prefetching(dst + start, src, first, dst, len, start + k, 1);
    else
        memcpy(dst + start, src, (size_t)first * sizeof(i64));
    memcpy(dst, src + first, (size_t)(k - first) * sizeof(i64));
}

/* slots_at(ps, buf, start, num_pages, owners) -> tensor: every slot of the pages
 * buf[start, start + num_pages) modulo len(buf), page-major (page * ps + i, wrapping), as a
 * new int64 tensor (owning the bytearray filled; NativeOps.take_slots: this function with ps
 * bound), the pages marked handed out in ``owners`` (the ownership bitmap); ValueError
 * (nothing read) when start is outside [0, len(buf)) with pages to take, num_pages is negative
 * or more than len(buf), or ps < 1; MemoryError when the slots cannot be had */
PyObject *slots_at(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    i64 start, num_pages, ps, num_slots = 0;
    Py_buffer b, own_buf;
    Owners own;
    if (nargs_is(n, 5, "slots_at") || arg_i64(args[0], &ps) || arg_i64(args[2], &start) ||
        arg_i64(args[3], &num_pages) || torch_ready() < 0)
        return NULL;
    if (arg_owners(args[4], &own_buf, &own)) return NULL;
    if (arg_buf(args[1], &b, 0)) {
        PyBuffer_Release(&own_buf);
        return NULL;
    }
    const i64 len = b.len / 8;
    const int inside = ps >= 1 && num_pages >= 0 && num_pages <= len &&
                       (num_pages == 0 || (start >= 0 && start < len)) &&
                       checked_mul(num_pages, ps, &num_slots) == 0;
    i64 *out = NULL;
    PyObject *slots = inside ? new_int64s(num_slots, &out) : NULL;
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
        mark_taken(&own, pages + start, first, 0); /* [start, len), then the wrapped rest */
        mark_taken(&own, pages, num_pages - first, 0);
    }
    release2(&b, &own_buf);
    if (!inside)
        PyErr_Format(PyExc_ValueError, "slots_at: %lld pages of %lld slots at %lld do not fit "
                     "a buffer of %lld", (long long)num_pages, (long long)ps, (long long)start,
                     (long long)len);
    return slots != NULL ? owned(slots) : NULL;
}
