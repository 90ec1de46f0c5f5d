/* A keyed source's dict sorted and packed in one pass of C (barca.engine.worker.key_source).

A sensor returning 200,000 keys runs on every tick; in Python, sorting its keys with their
positions and taking the values in that order costs some 30 ms, most of a one-key tick's own
work. Here the keys are sorted by radix on 8 bytes at a time (a key's first 8 bytes decide
almost every comparison), and the keys', the order's and (when every value is plain) the
values' JSON chunks are written directly. At 8,192 keys or more a second thread takes the keys'
half of the reading and writing while this one takes the values' (see `at_once`).

Only keys that are str made of printable ASCII other than '"' and '\' are taken (their JSON is
the key between quotes, byte for byte what orjson writes); for anything else the function
returns None and the caller packs in Python, with the same result. Such keys contain no NUL,
so two keys whose next 8 bytes agree (zero-padded past the end) are equal there or both go on.
Values are packed here when every one is such a str, an int of 64 bits, None, True or False;
else they are handed back in key order for the caller to pack.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define SECOND_THREAD 1
#define TWO_THREADS_FROM 8192  /* keys: below this, starting a thread costs what it saves */
#endif

#define WIDTH 8     /* bytes of a key compared as one integer */
#define SMALL 48    /* a run of keys agreeing so far this short is sorted by insertion */
#define DEEP 512    /* keys agreeing this far are sorted by comparison (no deeper recursion) */

typedef struct {
    uint64_t prefix; /* WIDTH bytes of the key from the current offset, big-endian */
    uint32_t pos;    /* the key's position in the dict */
    uint32_t len;    /* its length: a key of WIDTH bytes or fewer is its first prefix (until
                        a deeper pass, among keys that share their first WIDTH bytes) */
} rec;

typedef struct {
    PyObject **keys;  /* the dict's keys in its own order */
    rec *tmp;         /* scratch for the radix passes */
    int deeper;       /* a radix pass past the first WIDTH bytes rewrote some prefixes */
} ctx;

static inline const unsigned char *key_bytes(ctx *c, Py_ssize_t pos, Py_ssize_t *len) {
    *len = PyUnicode_GET_LENGTH(c->keys[pos]);
    return PyUnicode_1BYTE_DATA(c->keys[pos]);
}

static inline uint64_t prefix_of(const unsigned char *d, Py_ssize_t len, Py_ssize_t offset) {
    uint64_t p = 0;
    if (offset + WIDTH <= len) {  /* the usual case at offset 0: one load */
        unsigned char b[WIDTH];
        memcpy(b, d + offset, WIDTH);
        for (int j = 0; j < WIDTH; j++)
            p = (p << 8) | b[j];
        return p;
    }
    for (Py_ssize_t j = offset; j < offset + WIDTH; j++)
        p = (p << 8) | (j < len ? d[j] : 0);
    return p;
}

static int decimal_size(long long x) {
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    int digits = 1;
    while (u >= 10) {
        u /= 10;
        digits++;
    }
    return digits + (x < 0);
}

/* x in decimal, as JSON (and orjson) write an int */
static char *write_decimal(char *w, long long x) {
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    char digits[24];
    int d = 0;
    do {
        digits[d++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *w++ = '-';
    while (d)
        *w++ = digits[--d];
    return w;
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
            c->deeper = 1;
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

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether 8 bytes of ASCII (each below 0x80) are all printable and neither '"' nor '\\':
   each test sets a byte's high bit where it fails (a byte below n: its high bit after
   subtracting n; equal to c: a zero byte after xor). */
static inline int plain_word(uint64_t w) {
    uint64_t below = (w - ONES * 0x20) & ~w;
    uint64_t quote = w ^ (ONES * '"'), slash = w ^ (ONES * '\\'), del = w ^ (ONES * 0x7f);
    uint64_t equal = ((quote - ONES) & ~quote) | ((slash - ONES) & ~slash) |
                     ((del - ONES) & ~del);
    return ((below | equal) & HIGHS) == 0;
}

static int plain_text(PyObject *text) {
    if (!PyUnicode_CheckExact(text))
        return 0;
#if PY_VERSION_HEX < 0x030C0000
    if (!PyUnicode_IS_READY(text))  /* a legacy string: made ready by the Python path */
        return 0;
#endif
    if (!PyUnicode_IS_ASCII(text))
        return 0;
    const unsigned char *d = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, d + i, 8);
        if (!plain_word(w))
            return 0;
    }
    if (i < n) {  /* the rest, padded with a plain byte */
        uint64_t w = ONES * 'a';
        memcpy(&w, d + i, (size_t)(n - i));
        return plain_word(w);
    }
    return 1;
}

/* The length of a value's JSON when this module writes it (see the top), else -1. */
static Py_ssize_t plain_value_size(PyObject *v) {
    if (v == Py_None || v == Py_True)
        return 4;
    if (v == Py_False)
        return 5;
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        return decimal_size(x);
    }
    if (plain_text(v) && PyUnicode_GET_LENGTH(v) <= UINT32_MAX - 2)
        return PyUnicode_GET_LENGTH(v) + 2;
    return -1;
}

static char *write_value(char *w, PyObject *v) {
    if (v == Py_None || v == Py_True || v == Py_False) {
        const char *word = v == Py_None ? "null" : v == Py_True ? "true" : "false";
        size_t len = strlen(word);
        memcpy(w, word, len);
        return w + len;
    }
    if (PyLong_CheckExact(v))
        return write_decimal(w, PyLong_AsLongLong(v));  /* fits: checked on the way in */
    Py_ssize_t len = PyUnicode_GET_LENGTH(v);
    *w++ = '"';
    memcpy(w, PyUnicode_1BYTE_DATA(v), len);
    w += len;
    *w++ = '"';
    return w;
}

/* Scratch memory for one call. At 200,000 keys it is 10 MB, which faulted in 4 KB pages
   costs thousands of page faults (milliseconds on a virtual machine); where the kernel
   offers huge pages, a mapping of its own takes them. */
#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define HUGE_FROM (4 << 20)
static void *scratch_new(size_t size) {
    if (size < HUGE_FROM)
        return PyMem_Malloc(size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, size, MADV_HUGEPAGE);  /* a hint: without it, small pages */
    return p;
}

static void scratch_free(void *p, size_t size) {
    if (size < HUGE_FROM)
        PyMem_Free(p);
    else if (p)
        munmap(p, size);
}
#else
static void *scratch_new(size_t size) { return PyMem_Malloc(size); }
static void scratch_free(void *p, size_t size) { (void)size; PyMem_Free(p); }
#endif

/* One call's work, shared by its two threads. */
typedef struct {
    ctx c;
    PyObject **values;    /* the dict's values in its own order */
    rec *sorted;          /* a record per key: in the dict's order, then in key order */
    uint32_t *sizes;      /* each value's JSON length, by its position in the dict */
    Py_ssize_t n, chunk;
    int keys_plain, in_order, values_plain;  /* in_order: the dict's order is key order */
    PyObject *key_chunks, *order_chunks, *value_chunks;  /* tuples of bytes to fill */
} work;

static Py_ssize_t chunks_of(work *w) { return (w->n + w->chunk - 1) / w->chunk; }

/* The second thread's half of reading: the keys checked and their records. */
static void read_keys(work *w) {
    for (Py_ssize_t i = 0; i < w->n; i++) {
        PyObject *key = w->c.keys[i];
        if (!plain_text(key) || PyUnicode_GET_LENGTH(key) > UINT32_MAX || i >= UINT32_MAX) {
            w->keys_plain = 0;
            return;
        }
        uint32_t len = (uint32_t)PyUnicode_GET_LENGTH(key);
        w->sorted[i] = (rec){prefix_of(PyUnicode_1BYTE_DATA(key), len, 0), (uint32_t)i, len};
        if (w->in_order && i && (w->sorted[i - 1].prefix > w->sorted[i].prefix ||
                                 (w->sorted[i - 1].prefix == w->sorted[i].prefix &&
                                  !key_less(&w->c, i - 1, i))))
            w->in_order = 0;
    }
}

/* This thread's half: each value's length, while every one is plain. */
static void read_values(work *w) {
    for (Py_ssize_t i = 0; i < w->n; i++) {
        Py_ssize_t size = plain_value_size(w->values[i]);
        if (size < 0) {
            w->values_plain = 0;
            return;
        }
        w->sizes[i] = (uint32_t)size;
    }
}

static Py_ssize_t item_size(work *w, Py_ssize_t i, int part) {
    const rec *r = &w->sorted[i];
    if (part == 0)
        return r->len + 2;
    if (part == 1)
        return decimal_size(r->pos);
    return w->sizes[r->pos];
}

/* A tuple of bytes objects of the right sizes for JSON arrays of `chunk` items of a part (0:
   keys, 1: positions, 2: values), to be filled; NULL with an error set. */
static PyObject *chunks_to_fill(work *w, int part) {
    Py_ssize_t chunks = chunks_of(w);
    PyObject *out = PyTuple_New(chunks);
    for (Py_ssize_t k = 0; out && k < chunks; k++) {
        Py_ssize_t first = k * w->chunk, last = first + w->chunk < w->n ? first + w->chunk : w->n;
        Py_ssize_t size = 2 + (last - first - 1);  /* brackets and commas */
        for (Py_ssize_t i = first; i < last; i++)
            size += item_size(w, i, part);
        PyObject *bytes = PyBytes_FromStringAndSize(NULL, size);
        if (!bytes)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, k, bytes);
    }
    return out;
}

static char *write_key(work *w, char *to, const rec *r) {
    *to++ = '"';
    if (r->len <= WIDTH && !w->c.deeper) {  /* the key is its prefix */
        for (uint32_t j = 0; j < r->len; j++)
            *to++ = (char)(r->prefix >> (8 * (WIDTH - 1 - j)));
    } else {
        memcpy(to, PyUnicode_1BYTE_DATA(w->c.keys[r->pos]), r->len);
        to += r->len;
    }
    *to++ = '"';
    return to;
}

/* The items of `part` (see chunks_to_fill) written into its chunks. */
static void fill(work *w, PyObject *chunks, int part) {
    for (Py_ssize_t k = 0; k < chunks_of(w); k++) {
        Py_ssize_t first = k * w->chunk, last = first + w->chunk < w->n ? first + w->chunk : w->n;
        char *to = PyBytes_AS_STRING(PyTuple_GET_ITEM(chunks, k));
        *to++ = '[';
        for (Py_ssize_t i = first; i < last; i++) {
            const rec *r = &w->sorted[i];
            if (i > first)
                *to++ = ',';
            if (part == 0)
                to = write_key(w, to, r);
            else if (part == 1)
                to = write_decimal(to, r->pos);
            else
                to = write_value(to, w->values[r->pos]);
        }
        *to = ']';
    }
}

static void write_keys_and_order(work *w) {
    fill(w, w->key_chunks, 0);
    if (!w->in_order)
        fill(w, w->order_chunks, 1);
}

static void write_values(work *w) {
    if (w->values_plain)  /* else a list, handed back as it is */
        fill(w, w->value_chunks, 2);
}

#ifdef SECOND_THREAD
typedef struct {
    void (*step)(work *);
    work *w;
} second;

static void *run_second(void *arg) {
    ((second *)arg)->step(((second *)arg)->w);
    return NULL;
}
#endif

/* here(w) in this thread while there(w) runs in a second one, which touches no Python state:
   it reads objects and writes this call's own memory, and since this thread keeps the GIL
   throughout, no Python code runs meanwhile to change what it reads. Without a second thread,
   one after the other. */
static void at_once(void (*here)(work *), void (*there)(work *), work *w) {
#ifdef SECOND_THREAD
    pthread_t thread;
    second arg = {there, w};
    if (w->n >= TWO_THREADS_FROM && pthread_create(&thread, NULL, run_second, &arg) == 0) {
        here(w);
        pthread_join(thread, NULL);
        return;
    }
#endif
    here(w);
    there(w);
}

static PyObject *sort_and_pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyDict_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sort_and_pack(dict, chunk)");
        return NULL;
    }
    Py_ssize_t chunk = PyLong_AsSsize_t(args[1]);
    if (chunk < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "chunk must be positive");
        return NULL;
    }
    PyObject *dict = args[0], *result = NULL;
    Py_ssize_t n = PyDict_GET_SIZE(dict);
    size_t m = n ? (size_t)n : 1;
    size_t size = m * (2 * sizeof(PyObject *) + 2 * sizeof(rec) + sizeof(uint32_t));
    char *base = scratch_new(size);
    if (!base)
        return PyErr_NoMemory();
    work w = {.c = {(PyObject **)base, (rec *)(base + m * sizeof(PyObject *)), 0}};
    w.sorted = w.c.tmp + m;
    w.values = (PyObject **)(w.sorted + m);
    w.sizes = (uint32_t *)(w.values + m);
    w.n = n;
    w.chunk = chunk;
    w.keys_plain = w.in_order = w.values_plain = 1;
    Py_ssize_t at = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &at, &key, &value)) {
        w.c.keys[i] = key;
        w.values[i++] = value;
    }
    at_once(read_values, read_keys, &w);
    if (!w.keys_plain) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (!w.in_order)
        sort_run(&w.c, w.sorted, n, 0);
    w.key_chunks = chunks_to_fill(&w, 0);
    w.order_chunks = !w.key_chunks ? NULL : !w.in_order ? chunks_to_fill(&w, 1)
                                                          : Py_NewRef(Py_None);
    if (w.order_chunks && w.values_plain) {
        w.value_chunks = chunks_to_fill(&w, 2);
    } else if (w.order_chunks) {  /* handed back for the caller to pack */
        w.value_chunks = PyList_New(n);
        if (w.value_chunks)
            for (i = 0; i < n; i++)
                PyList_SET_ITEM(w.value_chunks, i,
                                Py_NewRef(w.values[w.sorted[i].pos]));
    }
    if (w.value_chunks) {
        at_once(write_values, write_keys_and_order, &w);
        result = PyTuple_Pack(3, w.key_chunks, w.order_chunks, w.value_chunks);
    }
    Py_XDECREF(w.key_chunks);
    Py_XDECREF(w.order_chunks);
    Py_XDECREF(w.value_chunks);
done:
    scratch_free(base, size);
    return result;
}

static PyMethodDef methods[] = {
    {"sort_and_pack", (PyCFunction)(void (*)(void))sort_and_pack, METH_FASTCALL,
     "sort_and_pack(dict, chunk) -> (key_chunks, order_chunks | None, values) | None\n\n"
     "The dict's keys sorted, packed as JSON arrays of `chunk` keys; each sorted key's\n"
     "position in the dict, packed alike (None when the dict is sorted already); the values\n"
     "in key order, packed alike (a tuple) when each is a str as a key is, an int of 64 bits,\n"
     "None, True or False, else as a list. None unless every key is a str of printable ASCII\n"
     "other than '\"' and '\\'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "key_packing", NULL, 0, methods};

PyMODINIT_FUNC PyInit_key_packing(void) { return PyModuleDef_Init(&module); }
