// reading.c: what a dump says, read the way every check reads it (reading.h).
#include "reading.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double dump_scalar(const DumpFile *f, const char *name, double missing) {
    const DumpArray *a = f ? dump_find(f, name) : NULL;
    return a && a->type != DUMP_TEXT && a->count > 0 ? dump_get(a, 0) : missing;
}

double dump_sumsq(const DumpArray *a) {
    DumpArray *memo = (DumpArray *)a;   // the array keeps its sum once made (dump.h)
    if (memo->sumsq_known) return memo->sumsq;
    double s = 0;
    if (a->type == DUMP_F32) {
        const float *x = a->data;
        for (uint64_t e = 0; e < a->count; e++) s += (double)x[e] * (double)x[e];
    } else {
        for (uint64_t e = 0; e < a->count; e++) s += dump_get(a, e) * dump_get(a, e);
    }
    memo->sumsq = s;
    memo->sumsq_known = true;
    return s;
}

double config_value(const DumpFile *d, const char *key, double missing) {
    const DumpArray *config = dump_find(d, "meta/config");
    if (!config || config->type != DUMP_TEXT) return missing;
    char k[40];
    snprintf(k, sizeof k, "\n%s ", key);
    const char *at = strstr((const char *)config->data, k);
    return at ? atof(at + strlen(k)) : missing;
}

bool config_is(const DumpFile *d, const char *key, const char *value) {
    const DumpArray *config = d ? dump_find(d, "meta/config") : NULL;
    if (!config || config->type != DUMP_TEXT) return false;
    char k[80];
    snprintf(k, sizeof k, "\n%s %s\n", key, value);
    return strstr((const char *)config->data, k) != NULL;
}

double count_params(const DumpFile *f) {
    double psi = 0;
    for (int i = 0; f && i < f->count; i++)
        if (strncmp(f->arrays[i].name, "param/final/", 12) == 0) psi += (double)f->arrays[i].count;
    return psi;
}

const char *dump_expect(const DumpFile *d, const char *name, DumpKind kind, int ndim, const uint64_t *shape,
                        bool required, char *why, size_t len) {
    const DumpArray *a = dump_find(d, name);
    if (!a) {
        if (!required) return NULL;
        snprintf(why, len, "the dump has no %s", name);
        return why;
    }
    if (kind == DUMP_KIND_NUMBERS && a->type == DUMP_TEXT) {
        snprintf(why, len, "the dump's %s is text, not numbers", name);
        return why;
    }
    if (kind == DUMP_KIND_TEXT && a->type != DUMP_TEXT) {
        snprintf(why, len, "the dump's %s is numbers, not text", name);
        return why;
    }
    if (ndim >= 0 && a->ndim != ndim) {
        snprintf(why, len, "the dump's %s has %d dimensions, not %d", name, a->ndim, ndim);
        return why;
    }
    for (int k = 0; shape && k < a->ndim; k++)
        if (shape[k] && a->shape[k] != shape[k]) {
            snprintf(why, len, "the dump's %s has %llu in dimension %d, not %llu", name,
                     (unsigned long long)a->shape[k], k, (unsigned long long)shape[k]);
            return why;
        }
    if (kind == DUMP_KIND_NUMBERS && a->count == 0) {
        snprintf(why, len, "the dump's %s is empty", name);
        return why;
    }
    return NULL;
}
