/* tuner/tests/test_mapping.c - task mappings: coverage, order, and emitted CUDA == CPU enumerator.
 *
 * The CPU enumerator is checked against the definition (composition = outer * inner_shape + inner,
 * outer tasks outermost; spatial = one task per worker; repeat = every task in `order`), every task
 * of the composed grid must be owned exactly once, and the emitted loop nest (which is plain C
 * apart from `#pragma unroll`) is compiled with the host C compiler and must list the same tasks in
 * the same order for every worker. */
#include "tuner/mapping.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXT 4096

#include "tests/check.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static int rnd(int n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int)(rng % (unsigned long long)n);
}

static tuner_mapping random_atom(int rank)
{
    int dims[3], order[3] = {0, 1, 2};
    for (int d = 0; d < 3; d++)
        dims[d] = 1 + rnd(3);
    for (int i = rank - 1; i > 0; i--) {
        int j = rnd(i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return tuner_map_atom_ordered(rnd(2) == 0, rank, dims, order);
}

/* Tasks of one worker by the recursive definition: atoms[0] * (rest). */
static long def_tasks(const tuner_mapping *m, long w, long (*out)[3])
{
    tuner_mapping head = *m, rest = *m;
    head.n_atoms = 1;
    if (m->n_atoms == 1) {
        const tuner_map_atom *at = &m->atoms[0];
        long n = 0;
        long size = 1;
        for (int d = 0; d < m->rank; d++)
            size *= at->dims[d];
        if (at->spatial) {
            long c[3] = {0, 0, 0}, r = w;
            for (int k = m->rank - 1; k >= 0; k--) {
                c[at->order[k]] = r % at->dims[at->order[k]];
                r /= at->dims[at->order[k]];
            }
            memcpy(out[0], c, sizeof(c));
            return 1;
        }
        /* repeat: walk the coordinates odometer-style, order[rank-1] fastest */
        long c[3] = {0, 0, 0};
        for (long t = 0; t < size; t++) {
            memcpy(out[n++], c, sizeof(c));
            for (int k = m->rank - 1; k >= 0; k--) {
                int d = at->order[k];
                if (++c[d] < at->dims[d])
                    break;
                c[d] = 0;
            }
        }
        return n;
    }
    rest.n_atoms = m->n_atoms - 1;
    memmove(rest.atoms, m->atoms + 1, sizeof(tuner_map_atom) * (size_t)rest.n_atoms);
    long wb = tuner_map_workers(&rest);
    long shape_b[3];
    tuner_map_shape(&rest, shape_b);
    static long ta[MAXT][3], tb[MAXT][3];
    long na = def_tasks(&head, w / wb, ta);
    long (*ta_copy)[3] = malloc(sizeof(long[3]) * (size_t)na);
    memcpy(ta_copy, ta, sizeof(long[3]) * (size_t)na);
    long nb = def_tasks(&rest, w % wb, tb);
    long n = 0;
    for (long i = 0; i < na; i++)
        for (long j = 0; j < nb; j++, n++)
            for (int d = 0; d < 3; d++)
                out[n][d] = ta_copy[i][d] * shape_b[d] + tb[j][d];
    free(ta_copy);
    return n;
}

static long tasks_a[MAXT][3], tasks_b[MAXT][3];

static void check_mapping(const tuner_mapping *m, FILE *prog, FILE *expect, int id)
{
    char name[256];
    tuner_map_str(m, name, sizeof(name));
    long workers = tuner_map_workers(m), shape[3];
    tuner_map_shape(m, shape);
    long total = shape[0] * shape[1] * shape[2];
    CHECK(workers * tuner_map_tasks_per_worker(m) == total, "%s: workers*tasks != grid", name);
    char *seen = calloc((size_t)total, 1);
    for (long w = 0; w < workers; w++) {
        long n = tuner_map_tasks(m, w, tasks_a, MAXT);
        long nd = def_tasks(m, w, tasks_b);
        CHECK(n == nd, "%s worker %ld: %ld tasks, definition says %ld", name, w, n, nd);
        for (long t = 0; t < n && t < nd; t++) {
            CHECK(memcmp(tasks_a[t], tasks_b[t], sizeof(tasks_a[t])) == 0, "%s worker %ld task %ld order", name, w, t);
            long lin = 0;
            bool in = true;
            for (int d = 0; d < 3; d++) {
                in = in && tasks_a[t][d] >= 0 && tasks_a[t][d] < shape[d];
                lin = lin * shape[d] + tasks_a[t][d];
            }
            CHECK(in, "%s: task out of the grid", name);
            if (in) {
                CHECK(!seen[lin], "%s: task %ld assigned twice", name, lin);
                seen[lin] = 1;
            }
            if (expect)
                fprintf(expect, "%d %ld %ld %ld %ld\n", id, w, tasks_a[t][0], tasks_a[t][1], tasks_a[t][2]);
        }
    }
    for (long i = 0; i < total; i++)
        CHECK(seen[i], "%s: task %ld never assigned", name, i);
    free(seen);

    if (prog) {
        const char *names[3] = {"i0", "i1", "i2"};
        tuner_sb sb;
        tuner_sb_init(&sb);
        tuner_sb_printf(&sb, "static void m%d(int w) {\n", id);
        tuner_map_emit_begin(&sb, m, "w", "t", names);
        if (m->rank == 1)
            tuner_sb_printf(&sb, "printf(\"%d %%d %%d 0 0\\n\", w, i0);\n", id);
        else if (m->rank == 2)
            tuner_sb_printf(&sb, "printf(\"%d %%d %%d %%d 0\\n\", w, i0, i1);\n", id);
        else
            tuner_sb_printf(&sb, "printf(\"%d %%d %%d %%d %%d\\n\", w, i0, i1, i2);\n", id);
        tuner_map_emit_end(&sb, m);
        tuner_sb_printf(&sb, "}\n");
        char *s = tuner_sb_take(&sb);
        fputs(s, prog);
        free(s);
    }
}

int main(void)
{
    /* Hand-written cases with known answers. */
    tuner_mapping m = tuner_map_compose(tuner_map_spatial(2, 4, 8, 0), tuner_map_repeat(2, 2, 1, 0));
    CHECK(tuner_map_workers(&m) == 32, "workers");
    long n = tuner_map_tasks(&m, 9, tasks_a, MAXT);
    /* worker 9 = (1, 1) of spatial(4,8); repeat(2,1) gives rows 2..3 of column 1 */
    CHECK(n == 2 && tasks_a[0][0] == 2 && tasks_a[0][1] == 1 && tasks_a[1][0] == 3 && tasks_a[1][1] == 1,
          "spatial(4,8)*repeat(2,1) worker 9");
    m = tuner_map_compose(tuner_map_repeat(2, 2, 1, 0), tuner_map_spatial(2, 4, 8, 0));
    n = tuner_map_tasks(&m, 9, tasks_a, MAXT);
    CHECK(n == 2 && tasks_a[0][0] == 1 && tasks_a[0][1] == 1 && tasks_a[1][0] == 5 && tasks_a[1][1] == 1,
          "repeat(2,1)*spatial(4,8) worker 9");
    int dims[2] = {4, 8}, colmajor[2] = {1, 0};
    m = tuner_map_atom_ordered(true, 2, dims, colmajor);
    n = tuner_map_tasks(&m, 5, tasks_a, MAXT);
    CHECK(n == 1 && tasks_a[0][0] == 1 && tasks_a[0][1] == 1, "column-major spatial worker 5");
    CHECK(tuner_map_compose(tuner_map_spatial(1, 4, 0, 0), tuner_map_spatial(2, 2, 2, 0)).rank == 0,
          "rank mismatch must be invalid");
    CHECK(tuner_map_spatial(2, 0, 3, 0).rank == 0, "zero dim must be invalid");
    CHECK(tuner_map_tasks(&m, 32, tasks_a, MAXT) < 0, "worker out of range");

    /* Random compositions of 1-4 atoms, rank 1-3, checked on the CPU and through emitted code. */
    char dir[] = "/tmp/hidet-mapXXXXXX";
    bool have_cc = mkdtemp(dir) != NULL;
    char path_c[64], path_exp[64], path_bin[64], path_out[64], cmd[512];
    snprintf(path_c, sizeof(path_c), "%s/m.c", dir);
    snprintf(path_exp, sizeof(path_exp), "%s/expect.txt", dir);
    snprintf(path_bin, sizeof(path_bin), "%s/m", dir);
    snprintf(path_out, sizeof(path_out), "%s/out.txt", dir);
    FILE *prog = have_cc ? fopen(path_c, "w") : NULL;
    FILE *expect = have_cc ? fopen(path_exp, "w") : NULL;
    if (prog)
        fputs("#include <stdio.h>\n", prog);
    const int N = 60;
    long worker_counts[60];
    for (int i = 0; i < N; i++) {
        int rank = 1 + rnd(3);
        tuner_mapping c = random_atom(rank);
        int atoms = 1 + rnd(4);
        for (int a = 1; a < atoms; a++)
            c = tuner_map_compose(c, random_atom(rank));
        CHECK(c.rank == rank && c.n_atoms == atoms, "compose");
        worker_counts[i] = tuner_map_workers(&c);
        check_mapping(&c, prog, expect, i);
    }
    if (prog && expect) {
        fputs("int main(void) {\n", prog);
        for (int i = 0; i < N; i++)
            fprintf(prog, "for (int w = 0; w < %ld; w++) m%d(w);\n", worker_counts[i], i);
        fputs("return 0; }\n", prog);
        fclose(prog);
        fclose(expect);
        snprintf(cmd, sizeof(cmd), "cc -O0 -o %s %s && %s > %s && cmp -s %s %s", path_bin, path_c, path_bin,
                 path_out, path_out, path_exp);
        int rc = system(cmd);
        CHECK(rc == 0, "emitted loop nests differ from the enumerator (see %s)", dir);
        if (rc == 0) {
            snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        }
    }
    printf("mapping: %d random compositions checked, %d failures\n", N, (int)failures);
    return failures ? 1 : 0;
}
