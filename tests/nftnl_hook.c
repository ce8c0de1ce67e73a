// SPDX-License-Identifier: LGPL-2.1-or-later
/* libnftnl's allocating calls, failed in turn with the malloc family's
 * (tests/alloc_hook.h): link with --wrap=nftnl_rule_alloc and the others
 * below (tests/CMakeLists.txt). libnftnl is a shared library, so its own
 * malloc calls do not go through alloc_hook.c; these wrappers stand for
 * them at the calls the helper makes. A failure does what libnftnl does
 * when out of memory: NULL or -1, errno ENOMEM. Rules are counted while
 * they live (nbt_nftnl_rules_live(), with --wrap=nftnl_rule_free too). */
#include <errno.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <stdint.h>

#include "alloc_hook.h"

#define FAIL_PTR()                                                                                 \
        do {                                                                                       \
                if (nbt_alloc_should_fail()) {                                                     \
                        errno = ENOMEM;                                                            \
                        return NULL;                                                               \
                }                                                                                  \
        } while (0)
#define FAIL_INT()                                                                                 \
        do {                                                                                       \
                if (nbt_alloc_should_fail()) {                                                     \
                        errno = ENOMEM;                                                            \
                        return -1;                                                                 \
                }                                                                                  \
        } while (0)

struct nftnl_rule *__real_nftnl_rule_alloc(void);
struct nftnl_chain *__real_nftnl_chain_alloc(void);
struct nftnl_table *__real_nftnl_table_alloc(void);
struct nftnl_expr *__real_nftnl_expr_alloc(const char *name);
struct nftnl_batch *__real_nftnl_batch_alloc(uint32_t pg_size, uint32_t pg_overrun_size);
struct nftnl_udata_buf *__real_nftnl_udata_buf_alloc(uint32_t data_size);
struct nftnl_set *__real_nftnl_set_alloc(void);
struct nftnl_set_elem *__real_nftnl_set_elem_alloc(void);
int __real_nftnl_set_set_str(struct nftnl_set *s, uint16_t attr, const char *str);
int __real_nftnl_set_set_data(struct nftnl_set *s, uint16_t attr, const void *data,
                              uint32_t data_len);
int __real_nftnl_set_elem_set(struct nftnl_set_elem *e, uint16_t attr, const void *data,
                              uint32_t data_len);
int __real_nftnl_rule_set_str(struct nftnl_rule *r, uint16_t attr, const char *str);
int __real_nftnl_chain_set_str(struct nftnl_chain *c, uint16_t attr, const char *str);
int __real_nftnl_chain_set_data(struct nftnl_chain *c, uint16_t attr, const void *data,
                                uint32_t data_len);
int __real_nftnl_table_set_str(struct nftnl_table *t, uint16_t attr, const char *str);
int __real_nftnl_expr_set_str(struct nftnl_expr *e, uint16_t type, const char *str);
int __real_nftnl_batch_update(struct nftnl_batch *b);
int __real_nftnl_chain_nlmsg_parse(const struct nlmsghdr *nlh, struct nftnl_chain *c);
int __real_nftnl_rule_nlmsg_parse(const struct nlmsghdr *nlh, struct nftnl_rule *r);

struct nftnl_rule *__wrap_nftnl_rule_alloc(void);
struct nftnl_chain *__wrap_nftnl_chain_alloc(void);
struct nftnl_table *__wrap_nftnl_table_alloc(void);
struct nftnl_expr *__wrap_nftnl_expr_alloc(const char *name);
struct nftnl_batch *__wrap_nftnl_batch_alloc(uint32_t pg_size, uint32_t pg_overrun_size);
struct nftnl_udata_buf *__wrap_nftnl_udata_buf_alloc(uint32_t data_size);
struct nftnl_set *__wrap_nftnl_set_alloc(void);
struct nftnl_set_elem *__wrap_nftnl_set_elem_alloc(void);
int __wrap_nftnl_set_set_str(struct nftnl_set *s, uint16_t attr, const char *str);
int __wrap_nftnl_set_set_data(struct nftnl_set *s, uint16_t attr, const void *data,
                              uint32_t data_len);
int __wrap_nftnl_set_elem_set(struct nftnl_set_elem *e, uint16_t attr, const void *data,
                              uint32_t data_len);
int __wrap_nftnl_rule_set_str(struct nftnl_rule *r, uint16_t attr, const char *str);
int __wrap_nftnl_chain_set_str(struct nftnl_chain *c, uint16_t attr, const char *str);
int __wrap_nftnl_chain_set_data(struct nftnl_chain *c, uint16_t attr, const void *data,
                                uint32_t data_len);
int __wrap_nftnl_table_set_str(struct nftnl_table *t, uint16_t attr, const char *str);
int __wrap_nftnl_expr_set_str(struct nftnl_expr *e, uint16_t type, const char *str);
int __wrap_nftnl_batch_update(struct nftnl_batch *b);
int __wrap_nftnl_chain_nlmsg_parse(const struct nlmsghdr *nlh, struct nftnl_chain *c);
int __wrap_nftnl_rule_nlmsg_parse(const struct nlmsghdr *nlh, struct nftnl_rule *r);

/* Rules allocated and not freed yet (nbt_nftnl_rules_live()). */
static long rules_live;

long nbt_nftnl_rules_live(void)
{
        return __atomic_load_n(&rules_live, __ATOMIC_SEQ_CST);
}

struct nftnl_rule *__wrap_nftnl_rule_alloc(void)
{
        struct nftnl_rule *r;

        FAIL_PTR();
        r = __real_nftnl_rule_alloc();
        if (r)
                __atomic_add_fetch(&rules_live, 1, __ATOMIC_SEQ_CST);
        return r;
}

void __real_nftnl_rule_free(const struct nftnl_rule *r);
void __wrap_nftnl_rule_free(const struct nftnl_rule *r);

void __wrap_nftnl_rule_free(const struct nftnl_rule *r)
{
        __atomic_sub_fetch(&rules_live, 1, __ATOMIC_SEQ_CST);
        __real_nftnl_rule_free(r);
}

struct nftnl_chain *__wrap_nftnl_chain_alloc(void)
{
        FAIL_PTR();
        return __real_nftnl_chain_alloc();
}

struct nftnl_table *__wrap_nftnl_table_alloc(void)
{
        FAIL_PTR();
        return __real_nftnl_table_alloc();
}

struct nftnl_expr *__wrap_nftnl_expr_alloc(const char *name)
{
        FAIL_PTR();
        return __real_nftnl_expr_alloc(name);
}

struct nftnl_batch *__wrap_nftnl_batch_alloc(uint32_t pg_size, uint32_t pg_overrun_size)
{
        FAIL_PTR();
        return __real_nftnl_batch_alloc(pg_size, pg_overrun_size);
}

struct nftnl_udata_buf *__wrap_nftnl_udata_buf_alloc(uint32_t data_size)
{
        FAIL_PTR();
        return __real_nftnl_udata_buf_alloc(data_size);
}

/* The set gratuitous ARP looks up (fw_compile.c). */
struct nftnl_set *__wrap_nftnl_set_alloc(void)
{
        FAIL_PTR();
        return __real_nftnl_set_alloc();
}

struct nftnl_set_elem *__wrap_nftnl_set_elem_alloc(void)
{
        FAIL_PTR();
        return __real_nftnl_set_elem_alloc();
}

int __wrap_nftnl_set_set_str(struct nftnl_set *s, uint16_t attr, const char *str)
{
        FAIL_INT();
        return __real_nftnl_set_set_str(s, attr, str);
}

int __wrap_nftnl_set_set_data(struct nftnl_set *s, uint16_t attr, const void *data,
                              uint32_t data_len)
{
        FAIL_INT();
        return __real_nftnl_set_set_data(s, attr, data, data_len);
}

int __wrap_nftnl_set_elem_set(struct nftnl_set_elem *e, uint16_t attr, const void *data,
                              uint32_t data_len)
{
        FAIL_INT();
        return __real_nftnl_set_elem_set(e, attr, data, data_len);
}

/* The setters strdup() or malloc() a copy. */
int __wrap_nftnl_rule_set_str(struct nftnl_rule *r, uint16_t attr, const char *str)
{
        FAIL_INT();
        return __real_nftnl_rule_set_str(r, attr, str);
}

int __wrap_nftnl_chain_set_str(struct nftnl_chain *c, uint16_t attr, const char *str)
{
        FAIL_INT();
        return __real_nftnl_chain_set_str(c, attr, str);
}

int __wrap_nftnl_chain_set_data(struct nftnl_chain *c, uint16_t attr, const void *data,
                                uint32_t data_len)
{
        FAIL_INT();
        return __real_nftnl_chain_set_data(c, attr, data, data_len);
}

int __wrap_nftnl_table_set_str(struct nftnl_table *t, uint16_t attr, const char *str)
{
        FAIL_INT();
        return __real_nftnl_table_set_str(t, attr, str);
}

int __wrap_nftnl_expr_set_str(struct nftnl_expr *e, uint16_t type, const char *str)
{
        FAIL_INT();
        return __real_nftnl_expr_set_str(e, type, str);
}

/* A batch that is full gets a new page. */
int __wrap_nftnl_batch_update(struct nftnl_batch *b)
{
        FAIL_INT();
        return __real_nftnl_batch_update(b);
}

/* Parsing copies the names. */
int __wrap_nftnl_chain_nlmsg_parse(const struct nlmsghdr *nlh, struct nftnl_chain *c)
{
        FAIL_INT();
        return __real_nftnl_chain_nlmsg_parse(nlh, c);
}

int __wrap_nftnl_rule_nlmsg_parse(const struct nlmsghdr *nlh, struct nftnl_rule *r)
{
        FAIL_INT();
        return __real_nftnl_rule_nlmsg_parse(nlh, r);
}
