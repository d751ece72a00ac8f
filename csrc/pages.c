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

/* The int64 data of the tensor ``t`` (any length, stored in *n), after the buffer arguments
 * are checked: 1; 0 with no error set when the loops do not read it (not_taken); -1 with an
 * error set. */
static int slots_of(PyObject *t, i64 *n, const i64 **data) {
    const int readable = may_read_tensors();
    if (readable <= 0) return readable;
    *n = -1;
    return tensor_data(t, n, data);
}

/* page_ids(slots, ps, out) -> True | None: out[i] = slots[i] // ps (floor) for every value of
 * the tensor ``slots`` into the int64 buffer ``out`` of exactly as many values. None, nothing
 * written, for a ``slots`` the loops do not read (the caller's numpy form takes it).
 * ValueError: ps < 1, len(out) != slots.numel(); TypeError: out not a writable C-contiguous
 * int64 buffer. */
PyObject *page_ids(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *slots;
    i64 ps, count;
    Py_buffer out_buf;
    if (nargs_is(n, 3, "page_ids") || arg_page_size(args[1], "page_ids", &ps) ||
        arg_buf(args[2], &out_buf, 1))
        return NULL;
    const int read = slots_of(args[0], &count, &slots);
    const int fits = read <= 0 || count == out_buf.len / 8;
    if (read > 0 && fits) divide_into(out_buf.buf, slots, count, ps);
    const i64 len = out_buf.len / 8;
    PyBuffer_Release(&out_buf);
    if (!fits)
        return PyErr_Format(PyExc_ValueError, "page_ids: out holds %lld values, slots %lld",
                            (long long)len, (long long)count);
    if (read <= 0) return not_taken();
    Py_RETURN_TRUE;
}

/* How many pages a segment of count >= 1 slots whose first slot sits at in-page offset
 * 0 <= offset < ps touches as segment_page_ids reads them: index 0, then ps - offset,
 * ps - offset + ps, ... < count (no overflow for any such count and ps) */
static i64 segment_reps(i64 count, i64 ps, i64 offset) {
    const i64 first = ps - offset; /* >= 1 */
    return 1 + (count > first ? (count - first - 1) / ps + 1 : 0);
}

/* segment_page_ids(slots, start, ps, offset, out) -> True | None: the pages of the segment
 * slots[start:] of the tensor ``slots`` whose first slot sits at in-page offset ``offset``:
 * slots[start] // ps, then slots[start + i] // ps for i = ps - offset, ps - offset + ps, ...
 * inside the tensor, into the int64 buffer ``out``, which must hold exactly that many. None,
 * nothing written, for a ``slots`` the loops do not read. ValueError, nothing written: ps < 1,
 * offset outside [0, ps), start outside [0, slots.numel()), out of another length; TypeError:
 * out not a writable C-contiguous int64 buffer. */
PyObject *segment_page_ids(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *slots;
    i64 start, ps, offset, count;
    Py_buffer out_buf;
    if (nargs_is(n, 5, "segment_page_ids") || arg_i64(args[1], &start) ||
        arg_page_size(args[2], "segment_page_ids", &ps) || arg_i64(args[3], &offset))
        return NULL;
    if (offset < 0 || offset >= ps)
        return PyErr_Format(PyExc_ValueError, "segment_page_ids: offset %lld is outside "
                            "[0, ps %lld)", (long long)offset, (long long)ps);
    if (arg_buf(args[4], &out_buf, 1)) return NULL;
    const int read = slots_of(args[0], &count, &slots);
    const i64 len = out_buf.len / 8;
    const int inside = read <= 0 || (start >= 0 && start < count &&
                                     len == segment_reps(count - start, ps, offset));
    if (read > 0 && inside) {
        i64 *out = out_buf.buf, k = 0;
        const i64 *seg = slots + start, seg_len = count - start;
        out[k++] = div_floor(seg[0], ps);
        for (i64 i = ps - offset; i < seg_len; i += ps) out[k++] = div_floor(seg[i], ps);
    }
    PyBuffer_Release(&out_buf);
    if (!inside)
        return PyErr_Format(PyExc_ValueError, "segment_page_ids: start %lld of %lld slots "
                            "(offset %lld, ps %lld) does not fit out of %lld", (long long)start,
                            (long long)count, (long long)offset, (long long)ps, (long long)len);
    if (read <= 0) return not_taken();
    Py_RETURN_TRUE;
}

/* write_at(buf, start, src) -> True | None: buf[start : start + src.numel()] = the values of the
 * tensor ``src`` (buf: a writable C-contiguous int64 buffer). None, nothing written, for a
 * ``src`` the loops do not read (the caller's numpy form writes it). ValueError, nothing
 * written, when that span is not inside buf; TypeError for another buf. */
PyObject *write_at(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    const i64 *src;
    i64 start, count;
    Py_buffer b;
    if (nargs_is(n, 3, "write_at") || arg_i64(args[1], &start) || arg_buf(args[0], &b, 1))
        return NULL;
    const int read = slots_of(args[2], &count, &src);
    const i64 len = b.len / 8;
    const int inside = read <= 0 || (start >= 0 && start <= len && count <= len - start);
    /* an empty tensor's data pointer may be NULL: no memmove (NULL is undefined even for 0) */
    if (read > 0 && inside && count > 0)
        memmove((i64 *)b.buf + start, src, (size_t)count * sizeof(i64));
    PyBuffer_Release(&b);
    if (!inside)
        return PyErr_Format(PyExc_ValueError, "write_at: [%lld, %lld + %lld) is outside a buffer "
                            "of %lld", (long long)start, (long long)start, (long long)count,
                            (long long)len);
    if (read <= 0) return not_taken();
    Py_RETURN_TRUE;
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
    if (nargs_is(n, 5, "slots_at") || arg_page_size(args[0], "slots_at", &ps) ||
        arg_i64(args[2], &start) || arg_i64(args[3], &num_pages) || torch_ready() < 0)
        return NULL;
    if (arg_owners(args[4], &own_buf, &own)) return NULL;
    if (arg_buf(args[1], &b, 0)) {
        PyBuffer_Release(&own_buf);
        return NULL;
    }
    const i64 len = b.len / 8;
    const int inside = num_pages >= 0 && num_pages <= len &&
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
