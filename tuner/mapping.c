/* tuner/mapping.c - task mappings: construction, composition, CPU enumeration, CUDA emission. */
#include "tuner/mapping.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static tuner_mapping map_invalid(void)
{
    tuner_mapping m;
    memset(&m, 0, sizeof(m));
    return m;
}

tuner_mapping tuner_map_atom_ordered(bool spatial, int rank, const int *dims, const int *order)
{
    if (rank < 1 || rank > TUNER_MAP_MAX_RANK || !dims || !order)
        return map_invalid();
    tuner_mapping m = map_invalid();
    bool seen[TUNER_MAP_MAX_RANK] = {false, false, false};
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 1 || order[d] < 0 || order[d] >= rank || seen[order[d]])
            return map_invalid();
        seen[order[d]] = true;
    }
    m.rank = rank;
    m.n_atoms = 1;
    m.atoms[0].spatial = spatial;
    for (int d = 0; d < TUNER_MAP_MAX_RANK; d++) {
        m.atoms[0].dims[d] = d < rank ? dims[d] : 1;
        m.atoms[0].order[d] = d < rank ? order[d] : d;
    }
    return m;
}

static tuner_mapping map_rowmajor(bool spatial, int rank, int d0, int d1, int d2)
{
    const int dims[3] = {d0, d1, d2};
    const int order[3] = {0, 1, 2};
    return tuner_map_atom_ordered(spatial, rank, dims, order);
}

tuner_mapping tuner_map_spatial(int rank, int d0, int d1, int d2)
{
    return map_rowmajor(true, rank, d0, d1, d2);
}

tuner_mapping tuner_map_repeat(int rank, int d0, int d1, int d2)
{
    return map_rowmajor(false, rank, d0, d1, d2);
}

tuner_mapping tuner_map_compose(tuner_mapping a, tuner_mapping b)
{
    if (a.rank < 1 || a.rank != b.rank || a.n_atoms + b.n_atoms > TUNER_MAP_MAX_ATOMS)
        return map_invalid();
    tuner_mapping m = a;
    for (int i = 0; i < b.n_atoms; i++)
        m.atoms[m.n_atoms++] = b.atoms[i];
    return m;
}

static long atom_size(const tuner_map_atom *at, int rank)
{
    long n = 1;
    for (int d = 0; d < rank; d++)
        n *= at->dims[d];
    return n;
}

long tuner_map_workers(const tuner_mapping *m)
{
    if (!m || m->rank < 1)
        return 0;
    long n = 1;
    for (int i = 0; i < m->n_atoms; i++)
        if (m->atoms[i].spatial)
            n *= atom_size(&m->atoms[i], m->rank);
    return n;
}

long tuner_map_tasks_per_worker(const tuner_mapping *m)
{
    if (!m || m->rank < 1)
        return 0;
    long n = 1;
    for (int i = 0; i < m->n_atoms; i++)
        if (!m->atoms[i].spatial)
            n *= atom_size(&m->atoms[i], m->rank);
    return n;
}

void tuner_map_shape(const tuner_mapping *m, long shape[TUNER_MAP_MAX_RANK])
{
    for (int d = 0; d < TUNER_MAP_MAX_RANK; d++) {
        shape[d] = 1;
        if (!m || m->rank < 1 || d >= m->rank)
            continue;
        for (int i = 0; i < m->n_atoms; i++)
            shape[d] *= m->atoms[i].dims[d];
    }
}

/* Decomposes a linear index of one atom into its coordinates: order[rank-1] varies fastest. */
static void atom_coords(const tuner_map_atom *at, int rank, long idx, long c[TUNER_MAP_MAX_RANK])
{
    for (int d = 0; d < TUNER_MAP_MAX_RANK; d++)
        c[d] = 0;
    for (int k = rank - 1; k >= 0; k--) {
        int d = at->order[k];
        c[d] = idx % at->dims[d];
        idx /= at->dims[d];
    }
}

long tuner_map_tasks(const tuner_mapping *m, long worker, long (*ret_coords)[TUNER_MAP_MAX_RANK],
                     long max)
{
    long workers = tuner_map_workers(m);
    if (workers < 1 || worker < 0 || worker >= workers || (max > 0 && !ret_coords))
        return -EINVAL;
    const int rank = m->rank;

    /* Worker index of every spatial atom: atoms[0] is the most significant digit. */
    long wa[TUNER_MAP_MAX_ATOMS] = {0};
    long rem = worker;
    for (int i = m->n_atoms - 1; i >= 0; i--) {
        if (!m->atoms[i].spatial)
            continue;
        long s = atom_size(&m->atoms[i], rank);
        wa[i] = rem % s;
        rem /= s;
    }

    long total = tuner_map_tasks_per_worker(m);
    for (long t = 0; t < total && t < max; t++) {
        /* Local task index of every repeat atom, atoms[0] most significant (outermost loop). */
        long ta[TUNER_MAP_MAX_ATOMS] = {0};
        long r = t;
        for (int i = m->n_atoms - 1; i >= 0; i--) {
            if (m->atoms[i].spatial)
                continue;
            long s = atom_size(&m->atoms[i], rank);
            ta[i] = r % s;
            r /= s;
        }
        long coord[TUNER_MAP_MAX_RANK] = {0, 0, 0};
        for (int i = 0; i < m->n_atoms; i++) {
            long c[TUNER_MAP_MAX_RANK];
            atom_coords(&m->atoms[i], rank, m->atoms[i].spatial ? wa[i] : ta[i], c);
            for (int d = 0; d < rank; d++)
                coord[d] = coord[d] * m->atoms[i].dims[d] + c[d];
        }
        for (int d = 0; d < TUNER_MAP_MAX_RANK; d++)
            ret_coords[t][d] = coord[d];
    }
    return total;
}

static int emitted_loops(const tuner_mapping *m)
{
    int n = 0;
    for (int i = 0; i < m->n_atoms; i++)
        if (!m->atoms[i].spatial)
            for (int d = 0; d < m->rank; d++)
                n += m->atoms[i].dims[d] > 1;
    return n;
}

void tuner_map_emit_begin(tuner_sb *sb, const tuner_mapping *m, const char *worker, const char *tmp,
                          const char *const names[TUNER_MAP_MAX_RANK])
{
    if (!m || m->rank < 1) {
        tuner_sb_puts(sb, "{\n#error \"hidetd: invalid task mapping\"\n");
        return;
    }
    const int rank = m->rank;
    tuner_sb_printf(sb, "{\nconst int %s_w = (int)(%s);\n", tmp, worker);

    /* Spatial atoms: worker digit, then its coordinates. */
    long after = 1; /* workers of the spatial atoms after atom i */
    long wsz[TUNER_MAP_MAX_ATOMS];
    for (int i = m->n_atoms - 1; i >= 0; i--) {
        wsz[i] = after;
        if (m->atoms[i].spatial)
            after *= atom_size(&m->atoms[i], rank);
    }
    bool first_spatial = true;
    for (int i = 0; i < m->n_atoms; i++) {
        const tuner_map_atom *at = &m->atoms[i];
        if (!at->spatial)
            continue;
        long s = atom_size(at, rank);
        /* The first spatial digit needs no modulo: the worker is below the total. */
        if (first_spatial)
            tuner_sb_printf(sb, "const int %s_w%d = %s_w / %ld;\n", tmp, i, tmp, wsz[i]);
        else
            tuner_sb_printf(sb, "const int %s_w%d = (%s_w / %ld) %% %ld;\n", tmp, i, tmp, wsz[i], s);
        first_spatial = false;
        long stride = 1;
        for (int k = rank - 1; k >= 0; k--) {
            int d = at->order[k];
            if (at->dims[d] == 1)
                tuner_sb_printf(sb, "const int %s_a%d_%d = 0;\n", tmp, i, d);
            else
                tuner_sb_printf(sb, "const int %s_a%d_%d = (%s_w%d / %ld) %% %d;\n", tmp, i, d, tmp, i,
                                stride, at->dims[d]);
            stride *= at->dims[d];
        }
    }
    /* Repeat atoms: loops, atom by atom (outermost first), dims in the atom's order. */
    for (int i = 0; i < m->n_atoms; i++) {
        const tuner_map_atom *at = &m->atoms[i];
        if (at->spatial)
            continue;
        for (int k = 0; k < rank; k++) {
            int d = at->order[k];
            if (at->dims[d] == 1)
                continue;
            tuner_sb_printf(sb, "#pragma unroll\nfor (int %s_a%d_%d = 0; %s_a%d_%d < %d; %s_a%d_%d++) {\n", tmp,
                            i, d, tmp, i, d, at->dims[d], tmp, i, d);
        }
        for (int d = 0; d < rank; d++)
            if (at->dims[d] == 1)
                tuner_sb_printf(sb, "const int %s_a%d_%d = 0;\n", tmp, i, d);
    }
    /* Coordinates: fold outer * inner_dim + inner over the atoms. */
    for (int d = 0; d < rank; d++) {
        tuner_sb_printf(sb, "const int %s = ", names[d]);
        for (int i = 1; i < m->n_atoms; i++)
            tuner_sb_puts(sb, "(");
        for (int i = 0; i < m->n_atoms; i++) {
            if (i == 0)
                tuner_sb_printf(sb, "%s_a0_%d", tmp, d);
            else
                tuner_sb_printf(sb, " * %d + %s_a%d_%d)", m->atoms[i].dims[d], tmp, i, d);
        }
        tuner_sb_puts(sb, ";\n");
    }
}

void tuner_map_emit_end(tuner_sb *sb, const tuner_mapping *m)
{
    int n = (m && m->rank >= 1) ? emitted_loops(m) : 0;
    for (int i = 0; i < n; i++)
        tuner_sb_puts(sb, "}\n");
    tuner_sb_puts(sb, "}\n");
}

char *tuner_map_str(const tuner_mapping *m, char *buf, int len)
{
    if (!buf || len < 1)
        return buf;
    buf[0] = '\0';
    if (!m || m->rank < 1) {
        snprintf(buf, (size_t)len, "invalid");
        return buf;
    }
    size_t off = 0;
    for (int i = 0; i < m->n_atoms && off < (size_t)len; i++) {
        const tuner_map_atom *at = &m->atoms[i];
        int w = snprintf(buf + off, (size_t)len - off, "%s%s(", i ? "*" : "", at->spatial ? "spatial" : "repeat");
        if (w < 0)
            break;
        off += (size_t)w;
        for (int d = 0; d < m->rank && off < (size_t)len; d++) {
            w = snprintf(buf + off, (size_t)len - off, "%s%d", d ? "," : "", at->dims[d]);
            if (w < 0)
                break;
            off += (size_t)w;
        }
        if (off < (size_t)len) {
            w = snprintf(buf + off, (size_t)len - off, ")");
            if (w > 0)
                off += (size_t)w;
        }
    }
    return buf;
}
