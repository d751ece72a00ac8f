/* The module kvpool.impl._native: the table of the functions Python calls. */
#include "native.h"

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
    return tensors_init() < 0 ? NULL : PyModule_Create(&module);
}
