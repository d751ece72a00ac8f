/* The module kvpool.impl._native: the table of the functions Python calls. */
#include "native.h"

#define FAST(name) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {
    FAST(extend_count), FAST(extend_layout), FAST(decode_count), FAST(decode_layout),
    FAST(page_ids),     FAST(distinct_runs), FAST(merge_below),  FAST(write_at),
    FAST(extend_take),  FAST(decode_take),   FAST(copy_into),    FAST(segment_page_ids),
    FAST(defer),        FAST(release),       FAST(slots_at),     FAST(sort_values),
    FAST(merge_front),  FAST(ascends_across),
    {NULL, NULL, 0, NULL},
};
/* Multi-phase initialisation. The module keeps process-wide state (torch's objects looked up
 * once, tensors.c), so it declares itself for the main interpreter only, and that it relies on
 * the GIL (every function runs with it held and releases it nowhere). */
static int exec_module(PyObject *m) {
    (void)m;
    return tensors_init();
}
static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "kvpool's compiled CPU hot paths", 0, methods,
                                    slots, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit__native(void) {
    return PyModuleDef_Init(&module);
}
