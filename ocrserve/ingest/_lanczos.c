/* LANCZOS resizing of 8-bit images with Pillow's arithmetic, faster on document pages.

   What the client does to a page is `img.resize(size, Image.Resampling.LANCZOS)` in Pillow; the pixels
   sent must be exactly those. Pillow's resampler is separable: for each axis, coefficients of a 3-lobe
   Lanczos window (in double precision, normalised to sum 1, then rounded to 22-bit fixed point), two
   passes (one per axis whose size changes) with an 8-bit, clipped image between them, and the order of
   the passes chosen by a rule that changed in Pillow 13. This file computes the same numbers (written
   here from that description, not from Pillow's source) and adds what a document page makes cheap:

   - runs of white (255) input: an output pixel whose window is all white is the window's white value,
     known once per output row or column, and copied rather than summed;
   - the vertical pass over whole rows with the same coefficients, which the compiler vectorises (an
     AVX2 clone is chosen at run time where the CPU has it).

   resize.py checks the result against Pillow on first use and falls back to Pillow when any pixel
   differs (another Pillow, another libm); tests/ingest/test_lanczos.py compares them bit for bit. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define BITS 22 /* fixed-point fraction bits: 8-bit values, 2 bits of headroom, in 32 bits */
#define HALF (1 << (BITS - 1))
#define BLOCK 64 /* bytes per whiteness block of the vertical pass */

#define R 16 /* rows per tile of the horizontal pass */

/* x86-64 with GCC or Clang: SSE2 transposes (every x86-64 CPU) and AVX2 sums where the CPU has them
   (chosen at run time); elsewhere plain C, the same numbers */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define X86 1
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2")))
static int have_avx2;
static int have_avx;

/* VZEROUPPER before the work: the vector registers' upper halves left dirty by code before (ISA-L's deflate)
   make the SSE2 transposes here several times slower (ocrserve/_gray.c says more); zeroupper(False) leaves
   them (the bench's before) */
__attribute__((target("avx"))) static void
zero_upper_avx(void) {
    _mm256_zeroupper();
}
#else
#define X86 0
#endif

static double
sinc(double x) {
    if (x == 0.0) {
        return 1.0;
    }
    x = x * M_PI;
    return sin(x) / x;
}

static double
lanczos3(double x) {
    if (-3.0 <= x && x < 3.0) {
        return sinc(x) * sinc(x / 3);
    }
    return 0.0;
}

static inline uint8_t
clip(int32_t acc) {
    int32_t v = acc >> BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* one axis: for each output index, the first input index, the number of taps and their weights */
typedef struct {
    int ksize;
    int *first;
    int *taps;
    int32_t *kk;    /* out x ksize */
    uint8_t *white; /* the output of an all-white window */
} Axis;

static void
axis_free(Axis *a) {
    free(a->first);
    free(a->taps);
    free(a->kk);
    free(a->white);
}

static int
axis_make(int in, int out, Axis *a) {
    double scale = (double)(float)in / out;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 3.0 * filterscale;
    double inv = 1.0 / filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *w = malloc((size_t)ksize * sizeof(double));
    a->ksize = ksize;
    a->first = malloc((size_t)out * sizeof(int));
    a->taps = malloc((size_t)out * sizeof(int));
    a->kk = malloc((size_t)out * ksize * sizeof(int32_t));
    a->white = malloc((size_t)out);
    if (!w || !a->first || !a->taps || !a->kk || !a->white) {
        free(w);
        axis_free(a);
        return 0;
    }
    for (int xx = 0; xx < out; xx++) {
        double center = (xx + 0.5) * scale;
        double ww = 0.0;
        int lo = (int)(center - support + 0.5);
        int hi = (int)(center + support + 0.5);
        if (lo < 0) {
            lo = 0;
        }
        if (hi > in) {
            hi = in;
        }
        int n = hi - lo;
        for (int x = 0; x < n; x++) {
            w[x] = lanczos3((x + lo - center + 0.5) * inv);
            ww += w[x];
        }
        int32_t *k = a->kk + (size_t)xx * ksize;
        int64_t sum = 0;
        for (int x = 0; x < ksize; x++) {
            double v = x < n ? (ww != 0.0 ? w[x] / ww : w[x]) : 0.0;
            k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << BITS)) : (int32_t)(0.5 + v * (1 << BITS));
            sum += k[x];
        }
        a->first[xx] = lo;
        a->taps[xx] = n;
        a->white[xx] = clip((int32_t)(HALF + 255 * sum));
    }
    free(w);
    return 1;
}

static inline int
all_white(const uint8_t *p, size_t n) {
    size_t i = 0;
    uint64_t acc = ~(uint64_t)0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        acc &= v;
    }
    for (; i < n; i++) {
        acc &= 0xFFFFFFFFFFFFFF00ull | p[i];
    }
    return acc == ~(uint64_t)0;
}

/* T[j * R + r] = rows[r][j] for j < len: R rows of bytes transposed (rows past `r` read as white) */
static void
transpose_in(const uint8_t *src, size_t sstride, int r, size_t len, uint8_t *T) {
    size_t j = 0;
#if X86
    if (r == R) {
        for (; j + 16 <= len; j += 16) {
            __m128i v[16];
            for (int q = 0; q < 16; q++) {
                v[q] = _mm_loadu_si128((const __m128i *)(src + (size_t)q * sstride + j));
            }
            /* 16 x 16 bytes: 4 rounds of interleaving (8-, 16-, 32-, 64-bit) */
            for (int q = 0; q < 8; q++) {
                __m128i a = v[2 * q], b = v[2 * q + 1];
                v[2 * q] = _mm_unpacklo_epi8(a, b);
                v[2 * q + 1] = _mm_unpackhi_epi8(a, b);
            }
            __m128i w[16];
            for (int q = 0; q < 4; q++) {
                w[4 * q + 0] = _mm_unpacklo_epi16(v[4 * q + 0], v[4 * q + 2]);
                w[4 * q + 1] = _mm_unpackhi_epi16(v[4 * q + 0], v[4 * q + 2]);
                w[4 * q + 2] = _mm_unpacklo_epi16(v[4 * q + 1], v[4 * q + 3]);
                w[4 * q + 3] = _mm_unpackhi_epi16(v[4 * q + 1], v[4 * q + 3]);
            }
            for (int q = 0; q < 2; q++) {
                for (int e = 0; e < 4; e++) {
                    v[8 * q + 2 * e] = _mm_unpacklo_epi32(w[8 * q + e], w[8 * q + 4 + e]);
                    v[8 * q + 2 * e + 1] = _mm_unpackhi_epi32(w[8 * q + e], w[8 * q + 4 + e]);
                }
            }
            for (int e = 0; e < 8; e++) {
                __m128i lo = _mm_unpacklo_epi64(v[e], v[8 + e]);
                __m128i hi = _mm_unpackhi_epi64(v[e], v[8 + e]);
                int col = (e >> 1) * 4 + (e & 1) * 2; /* which two columns this pair holds */
                _mm_storeu_si128((__m128i *)(T + (j + col) * R), lo);
                _mm_storeu_si128((__m128i *)(T + (j + col + 1) * R), hi);
            }
        }
    }
#endif
    for (int rr = 0; rr < R; rr++) {
        const uint8_t *s = src + (size_t)rr * sstride;
        for (size_t q = j; q < len; q++) {
            T[q * R + rr] = rr < r ? s[q] : 255;
        }
    }
}

/* dst rows[r][j] = O[j * R + r] for r < rows, j < len */
static void
transpose_out(const uint8_t *O, int r, size_t len, uint8_t *dst, size_t dstride) {
    size_t j = 0;
#if X86
    if (r == R) {
        for (; j + 16 <= len; j += 16) {
            uint8_t tile[16 * 16];
            transpose_in(O + j * R, R, R, 16, tile); /* the same 16 x 16 transposition */
            for (int q = 0; q < 16; q++) {
                memcpy(dst + (size_t)q * dstride + j, tile + q * R, 16);
            }
        }
    }
#endif
    for (int rr = 0; rr < r; rr++) {
        uint8_t *d = dst + (size_t)rr * dstride;
        for (size_t q = j; q < len; q++) {
            d[q] = O[q * R + rr];
        }
    }
}

/* one output column of a tile: R rows of sum_i k[i] * t_i, t_i = T + (lo + i) * step */
static void
hsum(const uint8_t *t, size_t step, int n, const int32_t *k, uint8_t *o) {
    int32_t acc[R];
    for (int rr = 0; rr < R; rr++) {
        acc[rr] = HALF;
    }
    for (int i = 0; i < n; i++) {
        for (int rr = 0; rr < R; rr++) {
            acc[rr] += t[(size_t)i * step + rr] * k[i];
        }
    }
    for (int rr = 0; rr < R; rr++) {
        o[rr] = clip(acc[rr]);
    }
}

#if X86
/* 16 lanes of (acc >> BITS) clipped to 0..255: saturating packs clip exactly, the values being small */
static AVX2 inline __m128i
pack16(__m256i a0, __m256i a1) {
    __m256i p = _mm256_packs_epi32(_mm256_srai_epi32(a0, BITS), _mm256_srai_epi32(a1, BITS));
    p = _mm256_permute4x64_epi64(p, 0xD8);
    return _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

static AVX2 void
hsum_avx2(const uint8_t *t, size_t step, int n, const int32_t *k, uint8_t *o) {
    __m256i a0 = _mm256_set1_epi32(HALF), a1 = a0;
    for (int i = 0; i < n; i++) {
        __m128i b = _mm_loadu_si128((const __m128i *)(t + (size_t)i * step));
        __m256i kv = _mm256_set1_epi32(k[i]);
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(b), kv));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)), kv));
    }
    _mm_storeu_si128((__m128i *)o, pack16(a0, a1));
}
#endif

/* horizontal pass over `rows` rows of c channels, R rows at a time: the tile's bytes transposed into T,
   so that each tap is one coefficient times R bytes in a row (vector sums), the R output rows transposed
   back from O; dark is scratch of in_w + 1 ints */
static void
hpass(
    const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, int rows, int in_w, int c,
    int out_w, const Axis *a, uint8_t *T, uint8_t *O, int *dark, uint8_t *white_row
) {
    size_t inb = (size_t)in_w * c, outb = (size_t)out_w * c;
    for (int xx = 0; xx < out_w; xx++) {
        memset(white_row + (size_t)xx * c, a->white[xx], (size_t)c);
    }
    for (int y0 = 0; y0 < rows; y0 += R) {
        int r = rows - y0 < R ? rows - y0 : R;
        const uint8_t *s = src + (size_t)y0 * sstride;
        int white = 1;
        for (int rr = 0; rr < r && white; rr++) {
            white = all_white(s + (size_t)rr * sstride, inb);
        }
        if (white) {
            for (int rr = 0; rr < r; rr++) {
                memcpy(dst + (size_t)(y0 + rr) * dstride, white_row, outb);
            }
            continue;
        }
        transpose_in(s, sstride, r, inb, T);
        /* dark[x]: the first column at or after x with a pixel that is not white */
        dark[in_w] = in_w;
        for (int x = in_w - 1; x >= 0; x--) {
            dark[x] = all_white(T + (size_t)x * c * R, (size_t)c * R) ? dark[x + 1] : x;
        }
        for (int xx = 0; xx < out_w; xx++) {
            int lo = a->first[xx], n = a->taps[xx];
            uint8_t *o = O + (size_t)xx * c * R;
            if (dark[lo] >= lo + n) {
                memset(o, a->white[xx], (size_t)c * R);
                continue;
            }
            const int32_t *k = a->kk + (size_t)xx * a->ksize;
            for (int ch = 0; ch < c; ch++) {
                const uint8_t *t = T + ((size_t)lo * c + ch) * R;
#if X86
                if (have_avx2) {
                    hsum_avx2(t, (size_t)c * R, n, k, o + (size_t)ch * R);
                    continue;
                }
#endif
                hsum(t, (size_t)c * R, n, k, o + (size_t)ch * R);
            }
        }
        transpose_out(O, r, outb, dst + (size_t)y0 * dstride, dstride);
    }
}

/* len bytes of one output row from n input rows */
static void
vsum(const uint8_t *src, size_t sstride, int n, const int32_t *k, uint8_t *o, size_t len) {
    size_t j = 0;
#if X86
    if (have_avx2) {
        for (; j + 16 <= len; j += 16) {
            hsum_avx2(src + j, sstride, n, k, o + j);
        }
    }
#endif
    for (; j < len; j++) {
        int32_t acc = HALF;
        for (int i = 0; i < n; i++) {
            acc += src[(size_t)i * sstride + j] * k[i];
        }
        o[j] = clip(acc);
    }
}

/* vertical pass: every output row from `taps` input rows of `width` bytes; rw is scratch of
   in_h x blocks bytes */
static void
vpass(
    const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, int in_h, size_t width, int out_h,
    const Axis *a, int shift, uint8_t *rw
) {
    size_t blocks = (width + BLOCK - 1) / BLOCK;
    for (int y = 0; y < in_h; y++) {
        const uint8_t *s = src + (size_t)y * sstride;
        for (size_t b = 0; b < blocks; b++) {
            size_t len = b + 1 < blocks ? BLOCK : width - b * BLOCK;
            rw[(size_t)y * blocks + b] = (uint8_t)all_white(s + b * BLOCK, len);
        }
    }
    for (int yy = 0; yy < out_h; yy++) {
        int lo = a->first[yy] - shift, n = a->taps[yy];
        const int32_t *k = a->kk + (size_t)yy * a->ksize;
        uint8_t *d = dst + (size_t)yy * dstride;
        for (size_t b = 0; b < blocks; b++) {
            size_t len = b + 1 < blocks ? BLOCK : width - b * BLOCK;
            int white = 1;
            for (int i = 0; i < n && white; i++) {
                white = rw[(size_t)(lo + i) * blocks + b];
            }
            if (white) {
                memset(d + b * BLOCK, a->white[yy], len);
            } else {
                vsum(src + (size_t)lo * sstride + b * BLOCK, sstride, n, k, d + b * BLOCK, len);
            }
        }
    }
}

/* rule 0: horizontal pass first (Pillow up to 12); rule 1: vertical first when the height shrinks by
   more than twice what the width does (Pillow 13) */
static int
horizontal_first(int rule, int w, int h, int ow, int oh) {
    if (rule == 0) {
        return 1;
    }
    return !((h - oh) > 0 && (h - oh) > (w - ow) * 2);
}

static int
resize_into(
    const uint8_t *src, int w, int h, int c, uint8_t *dst, int ow, int oh, int rule
) {
    int need_h = ow != w, need_v = oh != h;
    int hfirst = horizontal_first(rule, w, h, ow, oh);
    Axis ax = {0}, ay = {0};
    uint8_t *tmp = NULL, *scratch = NULL;
    uint8_t *tiles = NULL;
    int *dark = NULL;
    int ok = 0;
    if (!need_h && !need_v) {
        memcpy(dst, src, (size_t)w * h * c);
        return 1;
    }
    if ((need_h && !axis_make(w, ow, &ax)) || !axis_make(h, oh, &ay)) {
        goto end;
    }
    size_t rwmax = ((size_t)(w > ow ? w : ow) * c + BLOCK - 1) / BLOCK * (size_t)h;
    scratch = malloc(rwmax + (size_t)ow * c);
    dark = malloc(((size_t)w + 1) * sizeof(int));
    tiles = malloc(((size_t)w + ow) * c * R);
    if (!scratch || !dark || !tiles) {
        goto end;
    }
    if (need_h && need_v && hfirst) {
        /* only the input rows the vertical pass reads */
        int y0 = ay.first[0];
        int y1 = ay.first[oh - 1] + ay.taps[oh - 1];
        tmp = malloc((size_t)(y1 - y0) * ow * c);
        if (!tmp) {
            goto end;
        }
        hpass(src + (size_t)y0 * w * c, (size_t)w * c, tmp, (size_t)ow * c, y1 - y0, w, c, ow, &ax,
              tiles, tiles + (size_t)w * c * R, dark, scratch + rwmax);
        vpass(tmp, (size_t)ow * c, dst, (size_t)ow * c, y1 - y0, (size_t)ow * c, oh, &ay, y0, scratch);
    } else if (need_h && need_v) {
        tmp = malloc((size_t)oh * w * c);
        if (!tmp) {
            goto end;
        }
        vpass(src, (size_t)w * c, tmp, (size_t)w * c, h, (size_t)w * c, oh, &ay, 0, scratch);
        hpass(tmp, (size_t)w * c, dst, (size_t)ow * c, oh, w, c, ow, &ax, tiles, tiles + (size_t)w * c * R, dark,
              scratch + rwmax);
    } else if (need_h) {
        hpass(src, (size_t)w * c, dst, (size_t)ow * c, h, w, c, ow, &ax, tiles, tiles + (size_t)w * c * R, dark,
              scratch + rwmax);
    } else {
        vpass(src, (size_t)w * c, dst, (size_t)w * c, h, (size_t)w * c, oh, &ay, 0, scratch);
    }
    ok = 1;
end:
    free(tmp);
    free(scratch);
    free(dark);
    free(tiles);
    axis_free(&ax);
    axis_free(&ay);
    return ok;
}

static PyObject *
py_resize(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    int w, h, c, ow, oh, rule;
    if (!PyArg_ParseTuple(args, "y*iiiw*iii", &src, &w, &h, &c, &dst, &ow, &oh, &rule)) {
        return NULL;
    }
    PyObject *result = NULL;
    if (w < 1 || h < 1 || ow < 1 || oh < 1 || c < 1 || c > 4 || (rule != 0 && rule != 1)) {
        PyErr_SetString(PyExc_ValueError, "sizes must be positive, channels 1 to 4, rule 0 or 1");
    } else if (src.len != (Py_ssize_t)w * h * c || dst.len != (Py_ssize_t)ow * oh * c) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes do not match the image sizes");
    } else {
        int ok;
        Py_BEGIN_ALLOW_THREADS;
#if X86
        if (have_avx) {
            zero_upper_avx();
        }
#endif
        ok = resize_into(src.buf, w, h, c, dst.buf, ow, oh, rule);
        Py_END_ALLOW_THREADS;
        if (ok) {
            result = Py_NewRef(Py_None);
        } else {
            PyErr_NoMemory();
        }
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
    have_avx2 = on && __builtin_cpu_supports("avx2");
    return PyBool_FromLong(have_avx2);
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
    return PyBool_FromLong(have_avx);
#else
    return PyBool_FromLong(0);
#endif
}

static PyMethodDef methods[] = {
    {"zeroupper", py_zeroupper, METH_VARARGS,
     "zeroupper(on): clear the vector registers' upper halves before the work (on, where the CPU has AVX) or not; "
     "whether it is done"},
    {"simd", py_simd, METH_VARARGS,
     "simd(on): use the AVX2 sums where the CPU has them (on) or plain C (off); whether they are used"},
    {"resize", py_resize, METH_VARARGS,
     "resize(src, w, h, channels, dst, ow, oh, rule): LANCZOS-resize 8-bit pixels into dst"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lanczos", "LANCZOS resizing with Pillow's arithmetic", -1, methods,
};

PyMODINIT_FUNC
PyInit__lanczos(void) {
#if X86
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2");
    have_avx = __builtin_cpu_supports("avx");
#endif
    return PyModule_Create(&module);
}
