/* The gray test and channel copy of a page's pixels in one pass (ocrserve/png.py).

   plane(src, dst, offset): src is (H, W, 3) 8-bit RGB pixels (rows may be padded: any row stride, pixels
   packed); dst is an (H, S) 8-bit array with S >= offset + W. When every pixel has R = G = B, row y's R
   bytes are written to dst[y, offset:offset + W] and the result is True; at the first pixel with colour
   it stops and returns False (dst then holds some rows, to be thrown away). Nothing is computed: the
   bytes written are src's, so the result is numpy's `a[..., 0]` after a `(a == a[..., :1]).all()`.

   On x86-64 with SSSE3 (every x86-64 CPU since 2006; checked at run time), 16 pixels a step: three
   loads, the three channels gathered by byte shuffles, two compares; elsewhere plain C. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#define X86 1
#include <immintrin.h>
#else
#define X86 0
#endif

static int have_ssse3 = 0;
static int have_avx = 0;

#if X86
/* The upper halves of the vector registers zeroed (VZEROUPPER) before the work. Code that uses AVX or AVX-512
   and returns without it (ISA-L's deflate, which encodes every page just before) leaves them dirty, and legacy
   SSE instructions after that (this SSSE3 path, the resampler's SSE2 transposes) then run at a fraction of
   their speed: measured, the resampler's fit of a page 2.4x slower after one ISA-L call; pdfium and CPython
   were not slowed (bench/results/simd-upper-2026-12-06/). zeroupper(False) leaves them (the bench's before). */
__attribute__((target("avx"))) static void
zero_upper_avx(void) {
    _mm256_zeroupper();
}
#endif

static void
zero_upper(void) {
#if X86
    if (have_avx) {
        zero_upper_avx();
    }
#endif
}

/* Pixels [from, w) of one row: gray? (their R bytes written to out) */
static int
row_plain(const uint8_t *p, uint8_t *out, Py_ssize_t from, Py_ssize_t w) {
    for (Py_ssize_t x = from; x < w; x++) {
        uint8_t r = p[3 * x];
        if (p[3 * x + 1] != r || p[3 * x + 2] != r) {
            return 0;
        }
        out[x] = r;
    }
    return 1;
}

#if X86
/* The first 16 * (w / 16) pixels of one row; the caller does the rest */
__attribute__((target("ssse3"))) static int
row_ssse3(const uint8_t *p, uint8_t *out, Py_ssize_t w) {
    /* byte i of a 48-byte group of 16 pixels: pixel i / 3, channel i % 3; each mask takes one channel's
       bytes from one of the three 16-byte loads (-1: a zero byte, filled from another load) */
    const __m128i r0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i r1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i r2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i g0 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i g1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i g2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i b0 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    for (Py_ssize_t x = 0; x + 16 <= w; x += 16) {
        const uint8_t *q = p + 3 * x;
        __m128i v0 = _mm_loadu_si128((const __m128i *)q);
        __m128i v1 = _mm_loadu_si128((const __m128i *)(q + 16));
        __m128i v2 = _mm_loadu_si128((const __m128i *)(q + 32));
        __m128i r = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, r0), _mm_shuffle_epi8(v1, r1)),
                                 _mm_shuffle_epi8(v2, r2));
        __m128i g = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, g0), _mm_shuffle_epi8(v1, g1)),
                                 _mm_shuffle_epi8(v2, g2));
        __m128i b = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, b0), _mm_shuffle_epi8(v1, b1)),
                                 _mm_shuffle_epi8(v2, b2));
        __m128i same = _mm_and_si128(_mm_cmpeq_epi8(r, g), _mm_cmpeq_epi8(r, b));
        if (_mm_movemask_epi8(same) != 0xFFFF) {
            return 0;
        }
        _mm_storeu_si128((__m128i *)(out + x), r);
    }
    return 1;
}
#endif

static int
plane_into(const uint8_t *src, Py_ssize_t stride, Py_ssize_t w, Py_ssize_t h, uint8_t *dst,
           Py_ssize_t dstride) {
    for (Py_ssize_t y = 0; y < h; y++) {
        const uint8_t *p = src + y * stride;
        uint8_t *out = dst + y * dstride;
        Py_ssize_t done = 0;
#if X86
        if (have_ssse3) {
            if (!row_ssse3(p, out, w)) {
                return 0;
            }
            done = w - w % 16;
        }
#endif
        if (!row_plain(p, out, done, w)) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
py_plane(PyObject *self, PyObject *args) {
    PyObject *src_obj, *dst_obj;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "OOn", &src_obj, &dst_obj, &offset)) {
        return NULL;
    }
    Py_buffer src, dst;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    PyObject *result = NULL;
    int bytes = src.itemsize == 1 && dst.itemsize == 1 && (src.format == NULL || strcmp(src.format, "B") == 0)
                && (dst.format == NULL || strcmp(dst.format, "B") == 0);
    if (!bytes || src.ndim != 3 || src.shape[2] != 3 || src.strides[2] != 1 || src.strides[1] != 3
        || src.strides[0] < 3 * src.shape[1]) {
        PyErr_SetString(PyExc_ValueError, "src must be (H, W, 3) uint8 pixels with packed rows");
    } else if (dst.ndim != 2 || dst.shape[0] != src.shape[0] || offset < 0
               || dst.shape[1] < offset + src.shape[1]) {
        PyErr_SetString(PyExc_ValueError, "dst must be (H, S) uint8 with S >= offset + W");
    } else {
        int gray;
        Py_ssize_t h = src.shape[0], w = src.shape[1], stride = src.strides[0], dstride = dst.shape[1];
        uint8_t *out = (uint8_t *)dst.buf + offset;
        Py_BEGIN_ALLOW_THREADS;
        zero_upper();
        gray = plane_into(src.buf, stride, w, h, out, dstride);
        Py_END_ALLOW_THREADS;
        result = PyBool_FromLong(gray);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyObject *
py_simd(PyObject *self, PyObject *args) {
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) {
        return NULL;
    }
#if X86
    __builtin_cpu_init();
    have_ssse3 = on && __builtin_cpu_supports("ssse3");
    return PyBool_FromLong(have_ssse3);
#else
    return PyBool_FromLong(0);
#endif
}

static PyObject *
py_zeroupper(PyObject *self, PyObject *args) {
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) {
        return NULL;
    }
#if X86
    __builtin_cpu_init();
    have_avx = on && __builtin_cpu_supports("avx");
#endif
    return PyBool_FromLong(have_avx);
}

static PyMethodDef methods[] = {
    {"zeroupper", py_zeroupper, METH_VARARGS,
     "zeroupper(on): clear the vector registers' upper halves before the work (on, where the CPU has AVX) or not; "
     "whether it is done"},
    {"simd", py_simd, METH_VARARGS,
     "simd(on): use the SSSE3 path where the CPU has it (on) or plain C (off); whether it is used"},
    {"plane", py_plane, METH_VARARGS,
     "plane(src, dst, offset): R of (H, W, 3) src into dst[:, offset:offset + W] if every pixel is gray"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_gray", "The gray test and channel copy of RGB pixels in one pass", -1, methods,
};

PyMODINIT_FUNC
PyInit__gray(void) {
#if X86
    __builtin_cpu_init();
    have_ssse3 = __builtin_cpu_supports("ssse3");
    have_avx = __builtin_cpu_supports("avx");
#endif
    return PyModule_Create(&module);
}
