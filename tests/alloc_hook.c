// SPDX-License-Identifier: LGPL-2.1-or-later
/* Allocation-failure injection; see alloc_hook.h. */
#include "alloc_hook.h"

#include <errno.h>
#include <pthread.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
void __real_protobuf_c_message_free_unpacked(ProtobufCMessage *m, ProtobufCAllocator *a);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_protobuf_c_message_free_unpacked(ProtobufCMessage *m, ProtobufCAllocator *a);

static bool armed, paused, failed;
static unsigned long count, fail_at;
/* Only the thread that armed counts: a fuzzer's own threads (libFuzzer's
 * RSS watcher) allocate at any time. */
static pthread_t armer;

/* ---- live pointers: a chained hash set, its nodes from the real malloc ---- */

#define BUCKETS 65536u

struct node {
        void *p;
        struct node *next;
};

static struct node *buckets[BUCKETS];
static size_t live;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t bucket(const void *p)
{
        uintptr_t v = (uintptr_t)p;

        return (size_t)((v >> 4) ^ (v >> 20)) % BUCKETS;
}

static void remember(void *p)
{
        struct node *n = __real_malloc(sizeof(*n));

        /* Without a node the pointer is merely not counted. */
        if (!n)
                return;
        n->p = p;
        pthread_mutex_lock(&lock);
        n->next = buckets[bucket(p)];
        buckets[bucket(p)] = n;
        live++;
        pthread_mutex_unlock(&lock);
}

static void forget(void *p)
{
        struct node *gone = NULL;

        pthread_mutex_lock(&lock);
        for (struct node **n = &buckets[bucket(p)]; *n; n = &(*n)->next)
                if ((*n)->p == p) {
                        gone = *n;
                        *n = gone->next;
                        live--;
                        break;
                }
        pthread_mutex_unlock(&lock);
        __real_free(gone);
}

/* ---- the switch ---- */

void nbt_alloc_arm(unsigned long n)
{
        armer = pthread_self();
        armed = true;
        paused = false;
        failed = false;
        count = 0;
        fail_at = n;
}

void nbt_alloc_disarm(void)
{
        armed = false;
}

void nbt_alloc_pause(void)
{
        paused = true;
}

void nbt_alloc_resume(void)
{
        paused = false;
}

unsigned long nbt_alloc_count(void)
{
        return count;
}

bool nbt_alloc_failed(void)
{
        return failed;
}

size_t nbt_alloc_outstanding(void)
{
        return live;
}

/* True when this allocation is the one to fail. */
static bool fail_now(void)
{
        if (!armed || paused || !pthread_equal(pthread_self(), armer))
                return false;
        if (++count != fail_at)
                return false;
        failed = true;
        return true;
}

bool nbt_alloc_should_fail(void)
{
        return fail_now();
}

/* ---- the wrappers ---- */

void *__wrap_malloc(size_t size)
{
        void *p;

        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        p = __real_malloc(size);
        if (p)
                remember(p);
        return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
        void *p;

        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        p = __real_calloc(n, size);
        if (p)
                remember(p);
        return p;
}

void *__wrap_realloc(void *p, size_t size)
{
        void *q;

        if (fail_now()) {
                errno = ENOMEM;
                return NULL; /* p stays valid, as with a real failure */
        }
        q = __real_realloc(p, size);
        if (q || size == 0) {
                if (p)
                        forget(p);
                if (q)
                        remember(q);
        }
        return q;
}

void __wrap_free(void *p)
{
        if (p)
                forget(p);
        __real_free(p);
}

char *__wrap_strdup(const char *s)
{
        size_t n = strlen(s) + 1;
        char *p = __wrap_malloc(n);

        if (p)
                memcpy(p, s, n);
        return p;
}

char *__wrap_strndup(const char *s, size_t max)
{
        size_t n = strnlen(s, max);
        char *p = __wrap_malloc(n + 1);

        if (p) {
                memcpy(p, s, n);
                p[n] = '\0';
        }
        return p;
}

static void *pb_alloc(void *data, size_t size)
{
        (void)data;
        return __wrap_malloc(size);
}

static void pb_free(void *data, void *p)
{
        (void)data;
        __wrap_free(p);
}

static ProtobufCAllocator pb_heap = {.alloc = pb_alloc, .free = pb_free};

/* A message built with malloc (the helper's results) is freed by
 * libprotobuf-c with its default allocator, whose free() this hook would
 * not see: hand it one that goes through the wrapper. */
void __wrap_protobuf_c_message_free_unpacked(ProtobufCMessage *m, ProtobufCAllocator *a)
{
        __real_protobuf_c_message_free_unpacked(m, a ? a : &pb_heap);
}
