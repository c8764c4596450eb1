/* kernel_cache/kc_mem.c - see kc_mem.h. A chained hash table (keys are SHA-256 hex, so their first
 * 16 digits are already a uniform hash) plus an intrusive doubly-linked LRU list. */
#include "kernel_cache/kc_mem.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char key[KC_KEY_LEN + 1];
    struct entry *next_in_bucket;
    struct entry *prev, *next; /* LRU: head is most recent */
    char *body;
    size_t len;
    int rank;
    char tag[KC_KEY_LEN + 1];
    uint64_t age; /* kc_mem.age when put or confirmed */
} entry;

struct kc_mem {
    entry **buckets;
    size_t n_buckets; /* power of two */
    entry *head, *tail;
    size_t count, bytes;
    size_t max_entries, max_bytes;
    uint64_t age; /* bumped by kc_mem_age(): entries of an older age are stale */
};

static uint64_t key_hash(const char *key)
{
    /* Keys are validated hex produced by us; fold the first 16 characters. */
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < 16 && key[i]; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int kc_mem_new(size_t max_entries, size_t max_bytes, kc_mem **ret)
{
    if (!ret || max_entries == 0 || max_bytes == 0)
        return -EINVAL;
    kc_mem *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    size_t nb = 16;
    while (nb < max_entries && nb < ((size_t)1 << 24))
        nb <<= 1;
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (!c->buckets) {
        free(c);
        return -ENOMEM;
    }
    c->n_buckets = nb;
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    *ret = c;
    return 0;
}

static entry **slot_of(kc_mem *c, const char *key)
{
    entry **pp = &c->buckets[key_hash(key) & (c->n_buckets - 1)];
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next_in_bucket;
    return pp;
}

static void lru_unlink(kc_mem *c, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(kc_mem *c, entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

static void drop(kc_mem *c, entry **slot)
{
    entry *e = *slot;
    *slot = e->next_in_bucket;
    lru_unlink(c, e);
    c->count--;
    c->bytes -= e->len;
    free(e->body);
    free(e);
}

void kc_mem_free(kc_mem *c)
{
    if (!c)
        return;
    kc_mem_clear(c);
    free(c->buckets);
    free(c);
}

bool kc_mem_get(kc_mem *c, const char *op_key, kc_mem_hit *ret)
{
    if (!c || !op_key || !ret)
        return false;
    entry *e = *slot_of(c, op_key);
    if (!e)
        return false;
    if (c->head != e) {
        lru_unlink(c, e);
        lru_push_front(c, e);
    }
    ret->body = e->body;
    ret->len = e->len;
    ret->rank = e->rank;
    ret->tag = e->tag;
    ret->stale = e->age != c->age;
    return true;
}

int kc_mem_put(kc_mem *c, const char *op_key, const char *body, size_t len, int rank,
               const char *tag)
{
    if (!c || !op_key || strlen(op_key) != KC_KEY_LEN || (!body && len) ||
        (tag && strlen(tag) > KC_KEY_LEN))
        return -EINVAL;
    if (len > c->max_bytes)
        return -E2BIG;
    entry *e = calloc(1, sizeof(*e));
    char *copy = malloc(len + 1);
    if (!e || !copy) {
        free(e);
        free(copy);
        return -ENOMEM;
    }
    if (len)
        memcpy(copy, body, len);
    copy[len] = '\0';
    memcpy(e->key, op_key, KC_KEY_LEN + 1);
    e->body = copy;
    e->len = len;
    e->rank = rank;
    if (tag)
        memcpy(e->tag, tag, strlen(tag) + 1);
    e->age = c->age;

    entry **slot = slot_of(c, op_key);
    if (*slot)
        drop(c, slot);
    while (c->tail && (c->count + 1 > c->max_entries || c->bytes + len > c->max_bytes))
        drop(c, slot_of(c, c->tail->key));
    slot = slot_of(c, op_key); /* eviction may have changed the chain */
    e->next_in_bucket = *slot;
    *slot = e;
    lru_push_front(c, e);
    c->count++;
    c->bytes += len;
    return 0;
}

void kc_mem_remove(kc_mem *c, const char *op_key)
{
    if (!c || !op_key)
        return;
    entry **slot = slot_of(c, op_key);
    if (*slot)
        drop(c, slot);
}

void kc_mem_clear(kc_mem *c)
{
    if (!c)
        return;
    while (c->head)
        drop(c, slot_of(c, c->head->key));
}

void kc_mem_age(kc_mem *c)
{
    if (c)
        c->age++;
}

void kc_mem_confirm(kc_mem *c, const char *op_key)
{
    if (!c || !op_key)
        return;
    entry *e = *slot_of(c, op_key);
    if (e)
        e->age = c->age;
}

size_t kc_mem_count(const kc_mem *c) { return c ? c->count : 0; }

size_t kc_mem_bytes(const kc_mem *c) { return c ? c->bytes : 0; }
