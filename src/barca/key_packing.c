/* A keyed source's dict sorted and packed in one pass of C (barca.engine.worker.key_source).

A sensor returning 200,000 keys runs on every tick; in Python, sorting its keys with their
positions and taking the values in that order costs some 30 ms, most of a one-key tick's own
work. Here the keys are sorted by radix on 8 bytes at a time (a key's first 8 bytes decide
almost every comparison), and the keys' and the order's JSON chunks are written directly.

Only keys that are str made of printable ASCII other than '"' and '\' are taken (their JSON is
the key between quotes, byte for byte what orjson writes); for anything else the function
returns None and the caller packs in Python, with the same result. Such keys contain no NUL,
so two keys whose next 8 bytes agree (zero-padded past the end) are equal there or both go on.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define WIDTH 8     /* bytes of a key compared as one integer */
#define SMALL 48    /* a run of keys agreeing so far this short is sorted by insertion */
#define DEEP 512    /* keys agreeing this far are sorted by comparison (no deeper recursion) */

typedef struct {
    uint64_t prefix; /* WIDTH bytes of the key from the current offset, big-endian */
    uint32_t pos;    /* the key's position in the dict */
    uint32_t len;    /* its length: a key of WIDTH bytes or fewer is its first prefix */
} rec;

typedef struct {
    PyObject **keys;  /* the dict's keys in its own order */
    rec *tmp;         /* scratch for the radix passes */
} ctx;

static inline const unsigned char *key_bytes(ctx *c, Py_ssize_t pos, Py_ssize_t *len) {
    *len = PyUnicode_GET_LENGTH(c->keys[pos]);
    return PyUnicode_1BYTE_DATA(c->keys[pos]);
}

static inline uint64_t prefix_of(const unsigned char *d, Py_ssize_t len, Py_ssize_t offset) {
    uint64_t p = 0;
    for (Py_ssize_t j = offset; j < offset + WIDTH; j++)
        p = (p << 8) | (j < len ? d[j] : 0);
    return p;
}

static inline int key_less(ctx *c, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t la, lb;
    const unsigned char *da = key_bytes(c, a, &la), *db = key_bytes(c, b, &lb);
    int cmp = memcmp(da, db, la < lb ? la : lb);
    return cmp < 0 || (cmp == 0 && la < lb);
}

static void insertion_sort(ctx *c, rec *a, Py_ssize_t n) {
    for (Py_ssize_t i = 1; i < n; i++) {
        rec r = a[i];
        Py_ssize_t j = i;
        while (j > 0 && key_less(c, r.pos, a[j - 1].pos)) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = r;
    }
}

static ctx *compared;  /* qsort's comparator has no context; the GIL is held throughout */

static int compare(const void *x, const void *y) {
    Py_ssize_t a = ((const rec *)x)->pos, b = ((const rec *)y)->pos;
    return key_less(compared, a, b) ? -1 : key_less(compared, b, a);
}

/* Sort a[0:n], whose keys agree on their first `offset` bytes, by the rest of each key. */
static void sort_run(ctx *c, rec *a, Py_ssize_t n, Py_ssize_t offset) {
    if (n < SMALL) {
        insertion_sort(c, a, n);
        return;
    }
    if (offset >= DEEP) {
        compared = c;
        qsort(a, (size_t)n, sizeof(rec), compare);
        return;
    }
    static Py_ssize_t counts[WIDTH][256];  /* not on the stack: runs nest DEEP / WIDTH deep */
    memset(counts, 0, sizeof counts);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t p = a[i].prefix;  /* the first WIDTH bytes were taken with the keys */
        if (offset) {
            Py_ssize_t len;
            const unsigned char *data = key_bytes(c, a[i].pos, &len);
            p = a[i].prefix = prefix_of(data, len, offset);
        }
        for (int b = 0; b < WIDTH; b++)
            counts[b][(p >> (8 * b)) & 255]++;
    }
    rec *from = a, *to = c->tmp;
    for (int b = 0; b < WIDTH; b++) {  /* least significant byte first; stable passes */
        Py_ssize_t *count = counts[b];
        if (count[(from[0].prefix >> (8 * b)) & 255] == n)
            continue;  /* every key has the same byte here */
        Py_ssize_t sum = 0;
        for (int v = 0; v < 256; v++) {
            Py_ssize_t k = count[v];
            count[v] = sum;
            sum += k;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            to[count[(from[i].prefix >> (8 * b)) & 255]++] = from[i];
        rec *t = from; from = to; to = t;
    }
    if (from != a)
        memcpy(a, from, sizeof(rec) * n);
    /* keys that agree on these WIDTH bytes too go on to the next WIDTH */
    for (Py_ssize_t start = 0; start < n;) {
        Py_ssize_t end = start + 1;
        while (end < n && a[end].prefix == a[start].prefix)
            end++;
        if (end - start > 1)
            sort_run(c, a + start, end - start, offset + WIDTH);
        start = end;
    }
}

/* JSON arrays of `chunk` items each: the keys (quoted) or the positions, in the order of `a`
   (NULL: the dict's own order). */
static PyObject *pack(ctx *c, rec *a, Py_ssize_t n, Py_ssize_t chunk, int positions) {
    Py_ssize_t chunks = (n + chunk - 1) / chunk;
    PyObject *out = PyTuple_New(chunks);
    if (!out)
        return NULL;
    for (Py_ssize_t k = 0; k < chunks; k++) {
        Py_ssize_t first = k * chunk, last = first + chunk < n ? first + chunk : n;
        Py_ssize_t size = 2 + (last - first - 1);  /* brackets and commas */
        for (Py_ssize_t i = first; i < last; i++) {
            Py_ssize_t pos = a ? a[i].pos : i;
            if (positions) {
                Py_ssize_t digits = 1;
                for (Py_ssize_t v = pos; v >= 10; v /= 10)
                    digits++;
                size += digits;
            } else {
                size += (a ? a[i].len : PyUnicode_GET_LENGTH(c->keys[pos])) + 2;
            }
        }
        PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
        if (!bytes) {
            Py_DECREF(out);
            return NULL;
        }
        char *w = PyBytes_AS_STRING(bytes);
        *w++ = '[';
        for (Py_ssize_t i = first; i < last; i++) {
            Py_ssize_t pos = a ? a[i].pos : i;
            if (i > first)
                *w++ = ',';
            if (positions) {
                char digits[24];
                int d = 0;
                do {
                    digits[d++] = (char)('0' + pos % 10);
                    pos /= 10;
                } while (pos);
                while (d)
                    *w++ = digits[--d];
            } else if (a && a[i].len <= WIDTH) {  /* the key is in its record: no lookup */
                *w++ = '"';
                for (uint32_t j = 0; j < a[i].len; j++)
                    *w++ = (char)(a[i].prefix >> (8 * (WIDTH - 1 - j)));
                *w++ = '"';
            } else {
                Py_ssize_t len;
                const unsigned char *data = key_bytes(c, pos, &len);
                *w++ = '"';
                memcpy(w, data, len);
                w += len;
                *w++ = '"';
            }
        }
        *w = ']';
        PyTuple_SET_ITEM(out, k, bytes);
    }
    return out;
}

static int plain_key(PyObject *key) {
    if (!PyUnicode_CheckExact(key))
        return 0;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(key) < 0) {
        PyErr_Clear();
        return 0;
    }
#endif
    if (!PyUnicode_IS_ASCII(key))
        return 0;
    const unsigned char *d = PyUnicode_1BYTE_DATA(key);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(key); i < n; i++)
        if (d[i] < 0x20 || d[i] == '"' || d[i] == '\\' || d[i] == 0x7f)
            return 0;
    return 1;
}

static PyObject *sort_and_pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t chunk;
    if (nargs != 2 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sort_and_pack(dict, chunk)");
        return NULL;
    }
    chunk = PyLong_AsSsize_t(args[1]);
    if (chunk < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "chunk must be positive");
        return NULL;
    }
    PyObject *dict = args[0], *result = NULL;
    Py_ssize_t n = PyDict_GET_SIZE(dict);
    ctx c = {PyMem_Malloc(sizeof(PyObject *) * (n ? n : 1)),
             PyMem_Malloc(sizeof(rec) * (n ? n : 1))};
    PyObject **values = PyMem_Malloc(sizeof(PyObject *) * (n ? n : 1));
    rec *sorted = PyMem_Malloc(sizeof(rec) * (n ? n : 1));
    if (!c.keys || !c.tmp || !values || !sorted) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0, i = 0;
    PyObject *key, *value;
    int in_order = 1;
    while (PyDict_Next(dict, &at, &key, &value)) {
        if (!plain_key(key)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(key);
        if (len > UINT32_MAX || i >= UINT32_MAX) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        c.keys[i] = key;
        values[i] = value;
        sorted[i] = (rec){prefix_of(PyUnicode_1BYTE_DATA(key), len, 0), (uint32_t)i,
                          (uint32_t)len};
        if (in_order && i && !key_less(&c, i - 1, i))
            in_order = 0;
        i++;
    }
    rec *order = NULL;
    if (!in_order) {
        sort_run(&c, sorted, n, 0);
        order = sorted;
    }
    PyObject *key_chunks = pack(&c, order, n, chunk, 0);
    PyObject *order_chunks = !key_chunks ? NULL
                             : order ? pack(&c, order, n, chunk, 1) : Py_NewRef(Py_None);
    PyObject *value_list = order_chunks ? PyList_New(n) : NULL;
    if (value_list) {
        for (i = 0; i < n; i++)
            PyList_SET_ITEM(value_list, i, Py_NewRef(values[order ? order[i].pos : i]));
        result = PyTuple_Pack(3, key_chunks, order_chunks, value_list);
    }
    Py_XDECREF(key_chunks);
    Py_XDECREF(order_chunks);
    Py_XDECREF(value_list);
done:
    PyMem_Free(c.keys);
    PyMem_Free(c.tmp);
    PyMem_Free(values);
    PyMem_Free(sorted);
    return result;
}

static PyMethodDef methods[] = {
    {"sort_and_pack", (PyCFunction)(void (*)(void))sort_and_pack, METH_FASTCALL,
     "sort_and_pack(dict, chunk) -> (key_chunks, order_chunks | None, values) | None\n\n"
     "The dict's keys sorted, packed as JSON arrays of `chunk` keys; each sorted key's\n"
     "position in the dict, packed alike (None when the dict is sorted already); the values\n"
     "in key order. None unless every key is a str of printable ASCII other than '\"' and '\\'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "key_packing", NULL, 0, methods};

PyMODINIT_FUNC PyInit_key_packing(void) { return PyModuleDef_Init(&module); }
