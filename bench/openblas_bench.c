/* openblas_bench: the OpenBLAS peer of ember_bench's products, for
 * bench/compare.py. The same names, shapes and JSON lines as ember_bench's
 * mm_* and bmm_* entries; batched products are a loop of cblas_sgemm calls,
 * one per slice, as a C program using OpenBLAS would write them.
 *
 *   build/bench/openblas_bench [--only NAME_OR_PREFIX] [--threads N] [--repeat N]
 *
 * Built by bench/meson.build only when Debian's libopenblas-dev is installed. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

typedef struct {
    const char* name;
    int batch, m, k, n;
    int b_transposed;
} product;

/* Keep in step with ember_bench.cpp's kProducts and kAttention. */
static const product products[] = {
    {"mm_256", 1, 256, 256, 256, 0},
    {"mm_512", 1, 512, 512, 512, 0},
    {"mm_1024", 1, 1024, 1024, 1024, 0},
    {"mm_2048", 1, 2048, 2048, 2048, 0},
    {"mm_tiny_ffwd", 1, 256, 32, 128, 1},
    {"mm_small_ffwd", 1, 512, 64, 256, 1},
    {"mm_small_lm_head", 1, 512, 64, 65, 1},
    {"mm_lecture_qkv", 1, 16384, 384, 1152, 1},
    {"mm_lecture_ffwd1", 1, 16384, 384, 1536, 1},
    {"mm_lecture_ffwd2", 1, 16384, 1536, 384, 1},
    {"mm_lecture_lm_head", 1, 16384, 384, 65, 1},
    /* bmm: batch = batch*heads, m = n = T, k = hs */
    {"bmm_small", 64, 32, 16, 32, 0},
    {"bmm_t64", 64, 64, 16, 64, 0},
    {"bmm_macbook", 48, 64, 32, 64, 0},
    {"bmm_t128", 32, 128, 32, 128, 0},
    {"bmm_lecture", 384, 256, 64, 256, 0},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static float* random_floats(size_t count) {
    float* p = malloc(count * sizeof(float));
    if (!p) {
        fprintf(stderr, "openblas_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < count; ++i) p[i] = (float)((double)rand() / RAND_MAX - 0.5);
    return p;
}

/* One call of the entry: a product, or for bmm the two attention products of every slice. */
static void run(const product* p, const float* a, const float* b, const float* w, float* c, float* c2) {
    if (p->name[0] == 'b') {
        int T = p->m, hs = p->k;
        for (int s = 0; s < p->batch; ++s) {
            const float *q = a + (size_t)s * T * hs, *k = b + (size_t)s * T * hs, *ws = w + (size_t)s * T * T;
            /* scores = q @ k^T (T,T); out = w @ k (T,hs) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, q, hs, k, hs, 0.0f,
                        c + (size_t)s * T * T, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, ws, T, k, hs, 0.0f,
                        c2 + (size_t)s * T * hs, hs);
        }
        return;
    }
    /* b is (k,n), or for a Linear the weight (n,k) used transposed */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, p->b_transposed ? CblasTrans : CblasNoTrans, p->m, p->n, p->k, 1.0f, a,
                p->k, b, p->b_transposed ? p->k : p->n, 0.0f, c, p->n);
}

int main(int argc, char** argv) {
    const char* only = NULL;
    int threads = 0, repeat = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: openblas_bench [--only NAME_OR_PREFIX] [--threads N] [--repeat N]\n");
            return 2;
        }
    }
    if (threads > 0) openblas_set_num_threads(threads);
    int exact = 0;
    size_t count = sizeof products / sizeof products[0];
    for (size_t i = 0; only && i < count; ++i) exact |= !strcmp(products[i].name, only);
    srand(0);
    for (size_t i = 0; i < count; ++i) {
        const product* p = &products[i];
        if (only && (exact ? strcmp(p->name, only) : strncmp(p->name, only, strlen(only)))) continue;
        int bmm = p->name[0] == 'b';
        size_t slices = p->batch;
        float* a = random_floats(slices * p->m * p->k);
        float* b = random_floats(slices * p->k * p->n);
        float* w = bmm ? random_floats(slices * p->m * p->m) : NULL;
        float* c = random_floats(slices * p->m * p->n);
        float* c2 = bmm ? random_floats(slices * p->m * p->k) : NULL;
        double flops = 2.0 * slices * p->m * p->k * p->n * (bmm ? 2 : 1);
        int runs = repeat ? repeat : (int)(2e10 / flops);
        if (runs < 5) runs = 5;
        if (runs > 200 && !repeat) runs = 200;
        double* t = malloc(runs * sizeof(double));
        run(p, a, b, w, c, c2); /* warm-up */
        for (int r = 0; r < runs; ++r) {
            double t0 = now();
            run(p, a, b, w, c, c2);
            t[r] = now() - t0;
        }
        qsort(t, runs, sizeof(double), compare_doubles);
        double median = t[runs / 2], best = t[0];
        printf("{\"name\":\"%s\",\"kind\":\"%s\",\"batch\":%d,\"m\":%d,\"k\":%d,\"n\":%d,\"threads\":%d,"
               "\"ms\":%.4f,\"ms_best\":%.4f,\"gflops\":%.2f,\"gflops_best\":%.2f}\n",
               p->name, bmm ? "bmm" : "matmul", p->batch, p->m, p->k, p->n, openblas_get_num_threads(), median * 1e3,
               best * 1e3, flops / median * 1e-9, flops / best * 1e-9);
        fflush(stdout);
        free(a), free(b), free(w), free(c), free(c2), free(t);
    }
    return 0;
}
