// SPDX-License-Identifier: LGPL-2.1-or-later
/* Interface ops: protobuf in, link.c calls out. Validation checks every
 * name, template, MAC and reference before the batch runs; running records
 * how to undo each change in case a later op fails. */
#include <errno.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <unistd.h>

#include "backend.h"
#include "bandwidth.h"
#include "link.h"
#include "link_users.h"
#include "mac.h"
#include "names.h"
#include "netlink.h"
#include "opref.h"
#include "ops.h"

static struct nbd_links *links_of(const struct nbd_job *job)
{
        return nbd_job_ctx(job)->links;
}

/* The kernel half the job's interfaces are made and changed through. */
static const struct nbd_backend_links *kernel_of(const struct nbd_job *job)
{
        return &nbd_job_ctx(job)->be->links;
}

/* The kernel gives an interface IPv6 settings from 1280 bytes of MTU up
 * (IPV6_MIN_MTU): below it drops them, and above it again gives the
 * interface conf/default's, accept_ra=1 among them. */
#define IPV6_MTU_MIN 1280u

/* ---- policy: what a non-root caller may make and change ----
 * The op itself was granted already (dispatch.c); these are the checks of
 * its objects. Root is never asked. */

static const struct nbd_policy_section *policy_of(const struct nbd_validation *v)
{
        return nbd_policy_for(&v->ctx->cfg->policy, v->peer);
}

static const char *label_of(const struct nbd_policy_section *s)
{
        return s ? s->label : "policy: none";
}

/* A name a non-root caller creates here. Never an IFB's: bandwidth.c
 * takes nbifbN for the IFB of interface N. */
static int check_policy_name(struct nbd_validation *v, const char *name, Netbroker__Result *res)
{
        const struct nbd_policy_section *s = policy_of(v);
        char prefixes[NBD_POLICY_MAX_NAMES * IFNAMSIZ];

        if (nbd_peer_is_root(v->peer))
                return 0;
        if (strncmp(name, NBD_BW_IFB_PREFIX, strlen(NBD_BW_IFB_PREFIX)) == 0)
                return nbd_result_set(
                        res, -EPERM,
                        "policy: uid %u may not create %s (names starting with %s are "
                        "the helper's own IFBs)",
                        (unsigned)v->peer->uid, name, NBD_BW_IFB_PREFIX);
        if (nbd_policy_may_name(s, name))
                return 0;
        nbd_policy_prefixes(s, prefixes, sizeof(prefixes));
        return nbd_result_set(res, -EPERM,
                              "policy: uid %u may not create interface %s (it starts with none of "
                              "'name_prefixes' of [%s]: %s)",
                              (unsigned)v->peer->uid, name, label_of(s), prefixes);
}

/* The interfaces a non-root caller owns, and those its batch makes, stay
 * within max_devices. n: interfaces this op makes here. */
static int check_policy_count(struct nbd_validation *v, unsigned n, Netbroker__Result *res)
{
        const struct nbd_policy_section *s = policy_of(v);
        unsigned max = s ? s->max_devices : 0;

        if (nbd_peer_is_root(v->peer))
                return 0;
        if (!v->owned_counted) {
                v->owned = v->ctx->be->links.owned_by(v->ctx->links, v->peer->uid);
                v->owned_counted = true;
        }
        if (v->owned + v->creating + n > max)
                return nbd_result_set(res, -EDQUOT,
                                      "policy: uid %u may own at most %u interfaces (max_devices "
                                      "of [%s]): it owns %u, and this batch would make %u more",
                                      (unsigned)v->peer->uid, max, label_of(s), v->owned,
                                      v->creating + n);
        v->creating += n;
        return 0;
}

int nbd_check_owned(struct nbd_validation *v, const char *name, Netbroker__Result *res)
{
        uid_t owner;

        /* A reference (opref.h) is to an interface this batch makes. */
        if (nbd_peer_is_root(v->peer) || nbd_validation_was_created(v, name) || nbd_opref_is(name))
                return 0;
        if (v->ctx->be->links.owner(v->ctx->links, name, &owner) == 0 && owner == v->peer->uid)
                return 0;
        return nbd_result_set(res, -EPERM, "policy: uid %u does not own interface %s",
                              (unsigned)v->peer->uid, name);
}

int nbd_job_check_owned(struct nbd_job *job, const char *name, Netbroker__Result *res)
{
        const struct nbd_peer *p = nbd_job_peer(job);
        uid_t owner;
        int r;

        if (nbd_peer_is_root(p))
                return 0;
        r = kernel_of(job)->owner(links_of(job), name, &owner);
        /* Gone: the op fails on its own, with ENODEV. */
        if (r == -ENODEV || (r == 0 && owner == p->uid))
                return 0;
        return nbd_result_set(res, -EPERM, "policy: uid %u does not own interface %s",
                              (unsigned)p->uid, name);
}

int nbd_job_check_present(struct nbd_job *job, const char *name, Netbroker__Result *res,
                          const char *what)
{
        const struct nbd_peer *p = nbd_job_peer(job);
        uid_t owner;
        int r = kernel_of(job)->owner(links_of(job), name, &owner);

        /* Root's too: its rules would be the next guest's of that name. */
        if (r == -ENODEV)
                return nbd_result_set(res, -ENODEV,
                                      "%s: no interface %s now (gone since the request was "
                                      "checked): what binds its name would bind the next "
                                      "interface of that name",
                                      what, name);
        if (nbd_peer_is_root(p) || (r == 0 && owner == p->uid))
                return 0;
        return nbd_result_set(res, -EPERM, "policy: uid %u does not own interface %s",
                              (unsigned)p->uid, name);
}

/* A bridge the caller's interface may join: one the policy lists, or one
 * it owns (a missing one: the op fails on its own, with ENODEV). Else
 * sets res. */
static int check_attach(const struct nbd_policy_section *s, const struct nbd_peer *p,
                        const struct nbd_dispatch_ctx *ctx, const char *name, const char *master,
                        Netbroker__Result *res)
{
        uid_t owner;
        int r;

        if (nbd_peer_is_root(p) || nbd_policy_may_bridge(s, master))
                return 0;
        r = ctx->be->links.owner(ctx->links, master, &owner);
        if (r == -ENODEV || (r == 0 && owner == p->uid))
                return 0;
        return nbd_result_set(res, -EPERM,
                              "policy: uid %u may not attach %s to %s (not in 'bridges' of [%s], "
                              "and not a bridge made for uid %u)",
                              (unsigned)p->uid, name, master, label_of(s), (unsigned)p->uid);
}

static int check_policy_master(struct nbd_validation *v, const char *name, const char *master,
                               Netbroker__Result *res)
{
        if (nbd_validation_was_created(v, master) || nbd_opref_is(master))
                return 0;
        return check_attach(policy_of(v), v->peer, v->ctx, name, master, res);
}

static int check_policy_parent(struct nbd_validation *v, const char *parent, int mode,
                               Netbroker__Result *res, const char *what)
{
        const struct nbd_policy_section *s = policy_of(v);

        if (nbd_peer_is_root(v->peer))
                return 0;
        /* A reference to a template's interface: its name is checked
         * when it is known, before this op runs (dispatch.c). */
        if (!nbd_opref_is(parent) && !nbd_policy_may_parent(s, parent))
                return nbd_result_set(res, -EPERM,
                                      "policy: uid %u may not make a %s on %s (not in 'parents' of "
                                      "[%s])",
                                      (unsigned)v->peer->uid, what, parent, label_of(s));
        if (!nbd_policy_may_mode(s, (unsigned)mode))
                return nbd_result_set(res, -EPERM,
                                      "policy: uid %u may not make a %s in mode %s (not in "
                                      "'macvlan_modes' of [%s])",
                                      (unsigned)v->peer->uid, what, nbd_policy_mode_names[mode],
                                      label_of(s));
        return 0;
}

/* A persistent tap outlives the connection and TUNSETOWNER lets its owner
 * open it: both only for the caller itself. */
static int check_policy_tap(struct nbd_validation *v, const Netbroker__TapCreate *t,
                            Netbroker__Result *res)
{
        const struct nbd_peer *p = v->peer;

        if (nbd_peer_is_root(p) || (!t->persist && !t->set_owner) ||
            (t->set_owner && t->owner_uid == p->uid && nbd_peer_in_group(p, t->owner_gid)))
                return 0;
        if (!t->set_owner)
                return nbd_result_set(
                        res, -EPERM,
                        "policy: uid %u may make a persistent tap only with itself "
                        "as its owner (set_owner, owner uid %u and one of its groups)",
                        (unsigned)p->uid, (unsigned)p->uid);
        return nbd_result_set(res, -EPERM,
                              "policy: uid %u may give a tap only to itself (owner uid %u and one "
                              "of its groups), not to %u:%u",
                              (unsigned)p->uid, (unsigned)p->uid, t->owner_uid, t->owner_gid);
}

/* A veth peer may go only to a network namespace whose user namespace
 * belongs to the caller: one it made with unshare(CLONE_NEWUSER), where it
 * is root already. */
static int check_policy_netns(struct nbd_validation *v, int fd, unsigned index,
                              Netbroker__Result *res)
{
        const struct nbd_policy_section *s = policy_of(v);
        uid_t owner = 0;
        int userns, r = 0;

        if (nbd_peer_is_root(v->peer))
                return 0;
        if (!s || !s->netns_own)
                return nbd_result_set(
                        res, -EPERM,
                        "policy: uid %u may not move a veth peer into another network "
                        "namespace (no 'netns = own' in [%s])",
                        (unsigned)v->peer->uid, label_of(s));
        userns = ioctl(fd, NS_GET_USERNS);
        if (userns < 0 || ioctl(userns, NS_GET_OWNER_UID, &owner) < 0)
                r = -errno;
        if (userns >= 0)
                close(userns);
        if (r < 0)
                return nbd_result_set(res, -EPERM,
                                      "policy: cannot tell who owns the network namespace of fd "
                                      "%u: %s",
                                      index, strerror(-r));
        if (owner != v->peer->uid)
                return nbd_result_set(res, -EPERM,
                                      "policy: uid %u does not own the network namespace of fd %u "
                                      "(its user namespace belongs to uid %u)",
                                      (unsigned)v->peer->uid, index, (unsigned)owner);
        return 0;
}

/* ---- validation ---- */

/* The name as a message may repeat it: a refused name may hold bytes
 * that are no text (a terminal sequence; not UTF-8 for a protobuf string). */
static const char *shown(const char *name)
{
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
                if (*c < ' ' || *c >= 0x7f)
                        return "(bytes that are not printable ASCII)";
        return name;
}

static int check_name_syntax(const char *name, Netbroker__Result *res, const char *what)
{
        char prefix[IFNAMSIZ];

        if (nbd_is_template(name)) {
                if (nbd_template_parse(name, prefix) < 0)
                        return nbd_result_set(
                                res, -EINVAL,
                                "%s: bad template '%s': a name prefix (no digit at its end, "
                                "at most 14 bytes) followed by %%d and nothing else",
                                what, name);
                return 0;
        }
        if (strlen(name) >= IFNAMSIZ)
                return nbd_result_set(res, -EINVAL,
                                      "%s: interface name '%.64s' is longer than %d bytes", what,
                                      shown(name), IFNAMSIZ - 1);
        if (!nbd_ifname_valid(name))
                return nbd_result_set(
                        res, -EINVAL,
                        "%s: invalid interface name '%s' (1-15 bytes of printable ASCII but "
                        "/ : * ? [ ] , and space, not '.' or '..')",
                        what, shown(name));
        return 0;
}

/* A name the op will create: a template, or a free explicit name. */
static int check_new_name(struct nbd_validation *v, const char *name, Netbroker__Result *res,
                          const char *what)
{
        int r = check_name_syntax(name, res, what);

        if (r == 0)
                r = check_policy_name(v, name, res);
        if (r || nbd_is_template(name))
                return r;
        if (nbd_validation_was_created(v, name))
                return nbd_result_set(res, -EEXIST,
                                      "%s: %s is created by an earlier op of this batch", what,
                                      name);
        r = v->ctx->be->links.exists(v->ctx->links, name);
        if (r < 0)
                return nbd_result_set(res, r, "%s: cannot look up %s: %s", what, name,
                                      strerror(-r));
        if (r > 0)
                return nbd_result_set(res, -EEXIST, "%s: interface %s already exists", what, name);
        nbd_validation_created(v, name);
        return 0;
}

/* A name the op refers to: it exists now or an earlier op creates it. */
int nbd_check_interface(struct nbd_validation *v, const char *name, Netbroker__Result *res,
                        const char *what)
{
        int r;

        /* A reference to a template's interface (opref.h): checked again
         * on its name before the op runs. */
        if (nbd_opref_is(name))
                return 0;
        if (nbd_is_template(name))
                return nbd_result_set(res, -EINVAL,
                                      "%s: '%s': an existing interface is named, not a template",
                                      what, name);
        r = check_name_syntax(name, res, what);
        if (r || nbd_validation_was_created(v, name) || nbd_validation_known_to_exist(v, name))
                return r;
        /* The kernel still has it while the batch is validated. */
        if (nbd_validation_is_gone(v, name))
                return nbd_result_set(
                        res, -ENODEV,
                        "%s: no interface %s (an earlier op of this batch deletes it)", what, name);
        r = v->ctx->be->links.exists(v->ctx->links, name);
        if (r < 0)
                return nbd_result_set(res, r, "%s: cannot look up %s: %s", what, name,
                                      strerror(-r));
        if (r == 0)
                return nbd_result_set(res, -ENODEV, "%s: no interface %s", what, name);
        nbd_validation_exists(v, name);
        return 0;
}

static int check_mac(const char *mac, Netbroker__Result *res, const char *what, uint8_t out[6])
{
        if (nbp_mac_parse(mac, out) < 0)
                return nbd_result_set(res, -EINVAL,
                                      "%s: bad MAC address '%s' (want aa:bb:cc:dd:ee:ff)", what,
                                      mac);
        if (out[0] & 1)
                return nbd_result_set(res, -EINVAL, "%s: %s is a multicast address", what, mac);
        if (!(out[0] | out[1] | out[2] | out[3] | out[4] | out[5]))
                return nbd_result_set(res, -EINVAL, "%s: the all-zero MAC address is not allowed",
                                      what);
        return 0;
}

static int validate_tap(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__TapCreate *t = op->tap_create;
        int r;

        if (t->queues > NBD_LINK_MAX_QUEUES)
                return nbd_result_set(res, -EINVAL, "tap: %u queues; at most %d", t->queues,
                                      NBD_LINK_MAX_QUEUES);
        if ((r = check_policy_tap(v, t, res)) || (r = check_new_name(v, t->name, res, "tap")))
                return r;
        return check_policy_count(v, 1, res);
}

static int validate_macvlan_common(struct nbd_validation *v, const char *name, const char *parent,
                                   int mode, const char *mac, Netbroker__Result *res,
                                   const char *what)
{
        uint8_t m[6];
        int r;

        if (mode < NETBROKER__MACVLAN_MODE__MACVLAN_MODE_BRIDGE ||
            mode > NETBROKER__MACVLAN_MODE__MACVLAN_MODE_PASSTHRU)
                return nbd_result_set(res, -EINVAL, "%s: unknown mode %d", what, mode);
        if (mac[0] && (r = check_mac(mac, res, what, m)))
                return r;
        if ((r = nbd_check_interface(v, parent, res, what)) ||
            (r = check_policy_parent(v, parent, mode, res, what)) ||
            (r = check_new_name(v, name, res, what)))
                return r;
        return check_policy_count(v, 1, res);
}

static int validate_macvtap(struct nbd_validation *v, const Netbroker__Op *op,
                            Netbroker__Result *res)
{
        const Netbroker__MacvtapCreate *m = op->macvtap_create;

        /* One fd per queue: what TapCreate may have, and what one Fds
         * frame carries within the per-connection fd budget. */
        if (m->queues > NBD_LINK_MAX_QUEUES)
                return nbd_result_set(res, -EINVAL, "macvtap: %u queues; at most %d", m->queues,
                                      NBD_LINK_MAX_QUEUES);
        return validate_macvlan_common(v, m->name, m->parent, m->mode, m->mac, res, "macvtap");
}

static int validate_macvlan(struct nbd_validation *v, const Netbroker__Op *op,
                            Netbroker__Result *res)
{
        const Netbroker__MacvlanCreate *m = op->macvlan_create;

        return validate_macvlan_common(v, m->name, m->parent, m->mode, m->mac, res, "macvlan");
}

static int validate_veth(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__VethCreate *e = op->veth_create;
        int r;

        if (nbd_is_template(e->peer_name))
                return nbd_result_set(res, -EINVAL, "veth: the peer needs a name, not a template");
        if (e->has_peer_netns) {
                int fd = e->peer_netns_fd < v->nfds ? v->fds[e->peer_netns_fd] : -1;
                if (fd == NBD_FD_NOT_NETNS)
                        return nbd_result_set(res, -EINVAL,
                                              "veth: fd %u is not a network namespace",
                                              e->peer_netns_fd);
                if (fd < 0)
                        return nbd_result_set(res, -EBADF, "veth: no fd %u came with the request",
                                              e->peer_netns_fd);
                if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
                        return nbd_result_set(res, -EINVAL,
                                              "veth: fd %u is not a network namespace",
                                              e->peer_netns_fd);
                if ((r = check_policy_netns(v, fd, e->peer_netns_fd, res)))
                        return r;
                v->fd_used[e->peer_netns_fd] = true;
                /* The peer's name is checked by the kernel in its namespace. */
                if ((r = check_name_syntax(e->peer_name, res, "veth peer")))
                        return r;
        } else if ((r = check_new_name(v, e->peer_name, res, "veth peer"))) {
                return r;
        }
        if (!nbd_is_template(e->name) && strcmp(e->name, e->peer_name) == 0)
                return nbd_result_set(res, -EINVAL, "veth: both ends are named %s", e->name);
        if ((r = check_new_name(v, e->name, res, "veth")))
                return r;
        /* A peer in another namespace is no device here. */
        return check_policy_count(v, e->has_peer_netns ? 1 : 2, res);
}

static int validate_bridge(struct nbd_validation *v, const Netbroker__Op *op,
                           Netbroker__Result *res)
{
        int r = check_new_name(v, op->bridge_create->name, res, "bridge");

        return r ? r : check_policy_count(v, 1, res);
}

static int validate_set(struct nbd_validation *v, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__LinkSet *s = op->link_set;
        uint8_t m[6];
        int r;

        if ((r = nbd_check_interface(v, s->name, res, "link set")) ||
            (r = nbd_check_owned(v, s->name, res)))
                return r;
        if (s->state < NETBROKER__LINK_STATE__LINK_STATE_UNCHANGED ||
            s->state > NETBROKER__LINK_STATE__LINK_STATE_DOWN)
                return nbd_result_set(res, -EINVAL, "link set: unknown state %d", s->state);
        if (s->mtu && (s->mtu < 68 || s->mtu > 65535))
                return nbd_result_set(res, -EINVAL, "link set: MTU %u is outside 68-65535", s->mtu);
        /* Below 1280 the kernel drops the interface's IPv6 settings, and
         * gives it its defaults (accept_ra=1) when the MTU rises again:
         * what made() turned off would be on again (see locked_ipv6). */
        if (s->mtu && s->mtu < IPV6_MTU_MIN && !nbd_peer_is_root(v->peer))
                return nbd_result_set(res, -EPERM,
                                      "link set: policy: uid %u may not set the MTU of %s below "
                                      "%u (to %u): the kernel would drop the IPv6 settings that "
                                      "keep it from changing the host's routes through %s",
                                      (unsigned)v->peer->uid, s->name, IPV6_MTU_MIN, s->mtu,
                                      s->name);
        if (s->mac[0] && (r = check_mac(s->mac, res, "link set", m)))
                return r;
        if (s->master[0] && s->nomaster)
                return nbd_result_set(res, -EINVAL, "link set: both a master and nomaster");
        if (s->master[0] && ((r = nbd_check_interface(v, s->master, res, "link set master")) ||
                             (r = check_policy_master(v, s->name, s->master, res))))
                return r;
        return 0;
}

/* ---- idempotent clean-up ----
 * LinkDelete of an interface that is already gone succeeds, saying so
 * (run_delete), for a caller that may manage the name: root, or a name
 * its policy lets it make (name_prefixes, never an IFB's). Any other
 * caller gets the very refusal an existing interface not its own gets, so
 * it learns nothing of names outside its own prefixes from the answer. */
static int check_gone(struct nbd_validation *v, const char *name, Netbroker__Result *res)
{
        const struct nbd_policy_section *s = policy_of(v);

        if (nbd_peer_is_root(v->peer) ||
            (strncmp(name, NBD_BW_IFB_PREFIX, strlen(NBD_BW_IFB_PREFIX)) != 0 &&
             nbd_policy_may_name(s, name))) {
                /* nbd_check_interface() said ENODEV: the run says what it finds. */
                nbd_result_set(res, 0, NULL);
                if (res->message != protobuf_c_empty_string)
                        free(res->message);
                res->message = (char *)protobuf_c_empty_string;
                return 0;
        }
        return nbd_result_set(res, -EPERM, "policy: uid %u does not own interface %s",
                              (unsigned)v->peer->uid, name);
}

static int validate_delete(struct nbd_validation *v, const Netbroker__Op *op,
                           Netbroker__Result *res)
{
        int r = nbd_check_interface(v, op->link_delete->name, res, "link delete");

        if (r == -ENODEV)
                return check_gone(v, op->link_delete->name, res);
        if (r == 0)
                r = nbd_check_owned(v, op->link_delete->name, res);
        /* Later ops of the batch cannot count on it any more. */
        if (r == 0)
                nbd_validation_forget(v, op->link_delete->name);
        return r;
}

/* ---- undo ----
 * An undo runs when a later op fails, which may be long after its op ran
 * (a TapCreate waits for fd room): meanwhile the caller may have deleted
 * what the op made, and anyone, root included, made another interface of
 * that name. The undo works on the interface the op made or changed, by
 * ifindex, and only while the name still is that interface and, for a
 * caller other than root, still marked as its; else it changes nothing and
 * the op's result says so. */

int nbd_job_ifindex(struct nbd_job *job, const char *name)
{
        int ifindex = 0;

        if (kernel_of(job)->ifindex(links_of(job), name, &ifindex) < 0)
                return 0;
        return ifindex;
}

int nbd_job_check_undo(struct nbd_job *job, const char *name, int ifindex, struct nbd_err *err)
{
        const struct nbd_peer *p = nbd_job_peer(job);
        int now = 0, r;
        uid_t owner;

        r = kernel_of(job)->ifindex(links_of(job), name, &now);
        if (r == -ENODEV)
                return nbd_err_set(err, -ESTALE,
                                   "interface %s (ifindex %d) the op made or changed is gone", name,
                                   ifindex);
        if (r == 0 && (ifindex <= 0 || now != ifindex))
                return nbd_err_set(err, -ESTALE,
                                   "%s is no longer the interface the op made or changed "
                                   "(ifindex %d): another (ifindex %d) took its name",
                                   name, ifindex, now);
        if (r < 0)
                return nbd_err_set(err, r, "cannot look up %s: %s", name, strerror(-r));
        if (nbd_peer_is_root(p))
                return 0;
        r = kernel_of(job)->owner(links_of(job), name, &owner);
        if (r == -ENOENT || (r == 0 && owner != p->uid))
                return nbd_err_set(err, -EPERM, "uid %u no longer owns interface %s",
                                   (unsigned)p->uid, name);
        if (r < 0)
                return nbd_err_set(err, r, "cannot look up %s: %s", name, strerror(-r));
        return 0;
}

struct undo_link {
        char name[IFNAMSIZ];
        int ifindex; /* what the op made or changed */
        struct nbd_link_state state; /* a LinkSet's, to put back */
};

/* A LinkSet's undo. */
static int undo_link(struct nbd_job *job, void *data, struct nbd_err *err)
{
        struct undo_link *u = data;
        int r = nbd_job_check_undo(job, u->name, u->ifindex, err);

        if (r < 0)
                return r;
        r = kernel_of(job)->restore(links_of(job), u->name, &u->state);
        if (r < 0)
                return nbd_err_set(err, r, "cannot put %s back: %s", u->name, strerror(-r));
        return 0;
}

/* ---- the undo of a create: the batch's new devices go together ----
 * As a run of LinkDeletes (below): each device the failed batch made moves
 * into a link group of the roll-back's own, in its undo's place, once it
 * is found to be still what its op made and still the caller's; then one
 * RTM_DELLINK deletes the group on the links' lane (one RCU grace period
 * for all: 400 taps deleted one by one on the loop kept another client's
 * Ping waiting 7.7-8.4 s). If the kernel refuses the group's deletion
 * (someone put a device of theirs in the group), each device goes back to
 * its group and, checked again, is deleted on its own on the loop. */

struct unmade {
        size_t op;
        struct nbd_link_doomed d; /* d.ifindex: what the op made */
};

struct unmake {
        const struct nbd_backend_links *be;
        struct nbd_links *links;
        uint32_t group;
        struct unmade *v;
        size_t n, cap;
        /* The group's deletion: 1 until the lane ran it (so that done()
         * knows a call that never began: the helper stopping), then 0 or
         * -errno with err set. */
        int r;
        struct nbd_err err;
};

static uint32_t new_group(void);

/* The device the op made goes here and now, the old way: without memory
 * for the joint call, or when the kernel refused to move it. 0, or -errno
 * with err set. */
static int unmake_here(struct nbd_job *job, const struct undo_link *u, struct nbd_err *err)
{
        return kernel_of(job)->delete_index(links_of(job), u->ifindex, u->name, err);
}

/* The joint call's state, made at its first undo; NULL without memory. */
static struct unmake *unmake_new(struct nbd_job *job)
{
        struct unmake *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->be = kernel_of(job);
        s->links = links_of(job);
        s->group = new_group();
        s->r = 1;
        return s;
}

static int unmake_join(struct nbd_job *job, size_t op, void *data, void **joint, bool *ret_joined,
                       struct nbd_err *err)
{
        const struct undo_link *u = data;
        struct unmake *s = *joint;
        struct nbd_link_doomed d;
        int r = nbd_job_check_undo(job, u->name, u->ifindex, err);

        if (r < 0)
                return r;
        if (!s && (s = unmake_new(job)))
                *joint = s;
        if (s && s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 16;
                struct unmade *v = realloc(s->v, cap * sizeof(*v));
                if (v) {
                        s->v = v;
                        s->cap = cap;
                }
        }
        if (!s || s->n == s->cap)
                goto here;
        r = s->be->doom(s->links, u->name, s->group, &d, err);
        if (r == -ENODEV)
                return nbd_err_set(err, -ESTALE, "interface %s (ifindex %d) the op made is gone",
                                   u->name, u->ifindex);
        if (r < 0)
                goto here;
        /* By name: the device checked above, unless another took the name
         * between the two requests. */
        if (d.ifindex != u->ifindex) {
                s->be->undoom(s->links, &d);
                return nbd_err_set(err, -ESTALE,
                                   "%s is no longer the interface the op made (ifindex %d): "
                                   "another (ifindex %d) took its name",
                                   u->name, u->ifindex, d.ifindex);
        }
        s->v[s->n++] = (struct unmade){.op = op, .d = d};
        *ret_joined = true;
        return 0;
here:
        *ret_joined = false;
        return unmake_here(job, u, err);
}

/* On the links' lane: one RTM_DELLINK for the group. */
static void unmake_run(void *joint)
{
        struct unmake *s = joint;
        int *ifindexes = malloc((s->n ? s->n : 1) * sizeof(*ifindexes));

        if (!ifindexes) {
                s->r = nbd_err_oom(&s->err, "deleting a link group");
                return;
        }
        for (size_t i = 0; i < s->n; i++)
                ifindexes[i] = s->v[i].d.ifindex;
        s->r = s->be->delete_group(s->links, s->group, ifindexes, s->n, &s->err);
        free(ifindexes);
}

/* Refused, or never sent: each device back in its group, then, while it
 * is still what its op made and still the caller's, deleted on its own. */
static void unmake_one_by_one(struct nbd_job *job, struct unmake *s)
{
        for (size_t i = 0; i < s->n; i++) {
                const struct nbd_link_doomed *d = &s->v[i].d;
                struct nbd_err err;
                int r;
                s->be->undoom(s->links, d);
                r = nbd_job_check_undo(job, d->name, d->ifindex, &err);
                if (r == 0)
                        r = s->be->delete_index(s->links, d->ifindex, d->name, &err);
                if (r < 0)
                        nbd_job_mark_undo_skipped(job, s->v[i].op, err.msg);
                else
                        nbd_job_mark_undone(job, s->v[i].op);
        }
}

static void unmake_done(struct nbd_job *job, void *joint)
{
        struct unmake *s = joint;

        if (s->r <= 0)
                nbd_netlink_sent(1);
        if (s->r == 0) {
                for (size_t i = 0; i < s->n; i++)
                        nbd_job_mark_undone(job, s->v[i].op);
        } else {
                unmake_one_by_one(job, s);
        }
        free(s->v);
        free(s);
}

static const struct nbd_undo_joint unmake_joint = {
        .need = NBD_NEEDS_LINKS,
        .join = unmake_join,
        .run = unmake_run,
        .done = unmake_done,
};

static int remember_created(struct nbd_job *job, const char *name, int ifindex)
{
        struct undo_link *u = calloc(1, sizeof(*u));

        if (!u)
                return -ENOMEM;
        strcpy(u->name, name);
        u->ifindex = ifindex;
        return nbd_job_on_failure_joint(job, &unmake_joint, free, u, ifindex);
}

/* ---- running ---- */

/* max_devices again, now: validation counted what existed when the request
 * was read, but a caller's requests run one after another, and one
 * validated earlier may not have run yet. The interface map is current
 * (nbd_links_owned_by reads the notifications first), so the count here is
 * exact. n: interfaces the op is about to make here. */
static int check_count_at_run(struct nbd_job *job, unsigned n, Netbroker__Result *res,
                              const char *what)
{
        const struct nbd_peer *peer = nbd_job_peer(job);
        const struct nbd_policy_section *s;
        unsigned owned, max;

        if (nbd_peer_is_root(peer))
                return 0;
        s = nbd_policy_for(&nbd_job_ctx(job)->cfg->policy, peer);
        max = s ? s->max_devices : 0;
        owned = kernel_of(job)->owned_by(links_of(job), peer->uid);
        if (owned + n <= max)
                return 0;
        return nbd_result_set(res, -EDQUOT,
                              "%s: policy: uid %u may own at most %u interfaces (max_devices of "
                              "[%s]) and owns %u",
                              what, (unsigned)peer->uid, max, label_of(s), owned);
}

/* ---- a non-root caller's device changes none of the host's routes ----
 * Every device made here is an interface of the host's own IPv6 stack. With
 * the kernel's defaults, a Router Advertisement its caller writes into its
 * tap (or sends through its veth's peer, through a tap in a bridge of its,
 * or through its macvtap to its macvlan on the same parent in bridge mode)
 * installs a default route and on-link prefixes through it, and an address
 * from them; a Redirect reroutes a destination. That is
 * what only root may do (op_addr.c: a route redirects the host's own
 * traffic), so a non-root caller's device takes none of them: root's are
 * root's policy, as libvirt's are. sysctl_set lets its caller set
 * accept_ra to 0 only. */
static const char *const locked_ipv6[] = {"accept_ra", "autoconf", "accept_redirects"};

/* 1 when the kernel keeps IPv6 settings for ifname, 0 when it has no
 * IPv6 at all; else -ENOENT (the interface's MTU is below 1280) with err
 * set. */
static int ipv6_conf_check(const struct nbd_backend_net *net, const char *ifname,
                           struct nbd_err *err)
{
        char path[64];
        unsigned v;

        snprintf(path, sizeof(path), "ipv6/conf/%s/accept_ra", ifname);
        if (net->sysctl_get(path, &v, NULL) != -ENOENT)
                return 1;
        if (net->sysctl_get("ipv6/conf/all/accept_ra", &v, NULL) == -ENOENT)
                return 0;
        return nbd_err_set(err, -ENOENT,
                           "the kernel keeps no IPv6 settings for %s (its MTU is below %u), and "
                           "would give it its defaults back, accept_ra=1 among them, once the "
                           "MTU rose again",
                           ifname, IPV6_MTU_MIN);
}

/* accept_ra, autoconf and accept_redirects of ifname to 0: 0, or -errno
 * with err set. No IPv6 in the kernel is no error. */
static int lock_ipv6(struct nbd_job *job, const char *ifname, struct nbd_err *err)
{
        const struct nbd_backend_net *net = &nbd_job_ctx(job)->be->net;
        char path[64];
        int r = ipv6_conf_check(net, ifname, err);

        if (r <= 0)
                return r;
        for (size_t i = 0; r >= 0 && i < sizeof(locked_ipv6) / sizeof(*locked_ipv6); i++) {
                snprintf(path, sizeof(path), "ipv6/conf/%s/%s", ifname, locked_ipv6[i]);
                r = net->sysctl_set(path, 0, err);
        }
        return r < 0 ? r : 0;
}

/* A device just made: its IPv6 locked for a non-root caller (and its
 * veth peer, peer_here: when it stays in this namespace), then its fds
 * handed over and the creation recorded for the batch's undo. On failure
 * the device is deleted here. */
static int made(struct nbd_job *job, Netbroker__Result *res, struct nbd_link_made *m,
                bool peer_here)
{
        struct nbd_err err;
        int r = 0;

        /* Before the caller has an fd to write a frame into, or the op
         * succeeds. */
        if (!nbd_peer_is_root(nbd_job_peer(job))) {
                r = lock_ipv6(job, m->ifname, &err);
                if (r == 0 && peer_here)
                        r = lock_ipv6(job, m->peer, &err);
                if (r < 0) {
                        while (m->nfds > 0)
                                close(m->fds[--m->nfds]);
                        kernel_of(job)->delete (links_of(job), m->ifname, NULL);
                        if (r == -ENOENT)
                                return nbd_result_set(
                                        res, -EPERM, "policy: uid %u may not have %s: %s",
                                        (unsigned)nbd_job_peer(job)->uid, m->ifname, err.msg);
                        return nbd_result_set(res, r,
                                              "%s: cannot turn off Router Advertisements, autoconf "
                                              "and redirects on it (through which uid %u would "
                                              "change the host's routes): %s",
                                              m->ifname, (unsigned)nbd_job_peer(job)->uid, err.msg);
                }
        }
        res->ifname = strdup(m->ifname);
        res->ifindex = m->ifindex;
        if (m->peer[0])
                res->peer_ifname = strdup(m->peer);
        if (!res->ifname || (m->peer[0] && !res->peer_ifname)) {
                res->ifname = res->ifname ? res->ifname : (char *)protobuf_c_empty_string;
                res->peer_ifname =
                        res->peer_ifname ? res->peer_ifname : (char *)protobuf_c_empty_string;
                r = -ENOMEM;
                for (unsigned i = 0; i < m->nfds; i++)
                        close(m->fds[i]);
        } else if (m->nfds) {
                r = nbd_job_give_fds(job, res, m->fds, m->nfds);
        }
        /* Recorded last: if handing over failed, this op's own error stands
         * (it is not turned into "undone"), and the device goes here. */
        if (r == 0)
                r = remember_created(job, m->ifname, m->ifindex);
        if (r < 0) {
                kernel_of(job)->delete (links_of(job), m->ifname, NULL);
                return nbd_result_set(res, r, "%s: %s", m->ifname, strerror(-r));
        }
        nbd_stat_inc(NBD_STAT_LINKS_CREATED);
        return 0;
}

static int run_tap(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__TapCreate *t = op->tap_create;
        struct nbd_tap_spec s = {
                .name = t->name,
                .vnet_hdr = t->vnet_hdr,
                .queues = t->queues,
                .persist = t->persist,
                .set_owner = t->set_owner,
                .uid = t->owner_uid,
                .gid = t->owner_gid,
                .creator = nbd_job_peer(job)->uid,
        };
        struct nbd_link_made m = {0};
        struct nbd_err err;
        int r = check_count_at_run(job, 1, res, "tap");

        if (r)
                return r;
        r = kernel_of(job)->tap_create(links_of(job), &s, &m, &err);
        if (r < 0)
                return nbd_result_set(res, r, "tap: %s", err.msg);
        return made(job, res, &m, false);
}

static int run_macvlan_common(struct nbd_job *job, Netbroker__Result *res,
                              struct nbd_macvlan_spec *s, const char *mac)
{
        struct nbd_link_made m = {0};
        struct nbd_err err;
        int r;

        r = check_count_at_run(job, 1, res, s->tap ? "macvtap" : "macvlan");
        if (r)
                return r;
        s->has_mac = mac[0] && nbp_mac_parse(mac, s->mac) == 0;
        r = kernel_of(job)->macvlan_create(links_of(job), s, &m, &err);
        if (r < 0)
                return nbd_result_set(res, r, "%s: %s", s->tap ? "macvtap" : "macvlan", err.msg);
        return made(job, res, &m, false);
}

static int run_macvtap(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__MacvtapCreate *m = op->macvtap_create;
        struct nbd_macvlan_spec s = {
                .name = m->name,
                .parent = m->parent,
                .mode = (enum nbd_macvlan_mode)m->mode,
                .tap = true,
                .vnet_hdr = m->vnet_hdr,
                .creator = nbd_job_peer(job)->uid,
                .queues = m->queues,
        };

        return run_macvlan_common(job, res, &s, m->mac);
}

static int run_macvlan(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__MacvlanCreate *m = op->macvlan_create;
        struct nbd_macvlan_spec s = {
                .name = m->name,
                .parent = m->parent,
                .mode = (enum nbd_macvlan_mode)m->mode,
                .creator = nbd_job_peer(job)->uid,
        };

        return run_macvlan_common(job, res, &s, m->mac);
}

static int run_veth(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__VethCreate *e = op->veth_create;
        struct nbd_veth_spec s = {
                .name = e->name,
                .peer = e->peer_name,
                .peer_netns_fd = e->has_peer_netns ? nbd_job_request_fd(job, e->peer_netns_fd) : -1,
                .creator = nbd_job_peer(job)->uid,
        };
        struct nbd_link_made m = {0};
        struct nbd_err err;
        /* A peer that goes to another namespace is not counted here. */
        int r = check_count_at_run(job, e->has_peer_netns ? 1 : 2, res, "veth");

        if (r)
                return r;
        r = kernel_of(job)->veth_create(links_of(job), &s, &m, &err);
        if (r < 0)
                return nbd_result_set(res, r, "veth: %s", err.msg);
        return made(job, res, &m, !e->has_peer_netns);
}

static int run_bridge(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        struct nbd_link_made m = {0};
        struct nbd_err err;
        int r = check_count_at_run(job, 1, res, "bridge");

        if (r)
                return r;
        r = kernel_of(job)->bridge_create(links_of(job), op->bridge_create->name,
                                          nbd_job_peer(job)->uid, &m, &err);
        if (r < 0)
                return nbd_result_set(res, r, "bridge: %s", err.msg);
        return made(job, res, &m, false);
}

static int recheck_master(struct nbd_job *job, const char *name, const char *master,
                          Netbroker__Result *res)
{
        const struct nbd_peer *p = nbd_job_peer(job);

        return check_attach(nbd_policy_for(&nbd_job_ctx(job)->cfg->policy, p), p, nbd_job_ctx(job),
                            name, master, res);
}

/* The master ifname has now, or "" (none, gone, or not read). */
static void master_of(struct nbd_job *job, const char *name, char ret[IFNAMSIZ])
{
        struct nbd_link_info *info = NULL;
        size_t n = 0;

        ret[0] = '\0';
        if (kernel_of(job)->show(kernel_of(job)->netlink(links_of(job)), name, &info, &n, NULL) ==
                    0 &&
            n == 1)
                snprintf(ret, IFNAMSIZ, "%s", info[0].master);
        free(info);
}

/* A non-root LinkSet that may raise an MTU (its own, or a bridge's that
 * follows its ports: a port joining or leaving) on an interface the
 * kernel keeps no IPv6 settings for would have it take the defaults,
 * accept_ra=1 among them: refused. 0, or -EPERM with res set. */
static int check_ipv6_kept(struct nbd_job *job, const Netbroker__LinkSet *s, const char *old_master,
                           Netbroker__Result *res)
{
        const struct nbd_backend_net *net = &nbd_job_ctx(job)->be->net;
        const char *which[3] = {s->mtu ? s->name : NULL, old_master[0] ? old_master : NULL,
                                s->master[0] ? s->master : NULL};
        struct nbd_err err;

        for (size_t i = 0; i < 3; i++)
                if (which[i] && ipv6_conf_check(net, which[i], &err) < 0)
                        return nbd_result_set(res, -EPERM,
                                              "link set: policy: uid %u may not change the %s of "
                                              "%s: %s",
                                              (unsigned)nbd_job_peer(job)->uid, i ? "ports" : "MTU",
                                              which[i], err.msg);
        return 0;
}

/* After a non-root LinkSet: its interface and the bridges it left and
 * joined, when the caller's, keep their IPv6 locked (a bridge whose MTU
 * rose took the kernel's defaults). 0, or -errno with err set. */
static int relock_ipv6(struct nbd_job *job, const Netbroker__LinkSet *s, const char *old_master,
                       struct nbd_err *err)
{
        const char *which[3] = {s->name, old_master[0] ? old_master : NULL,
                                s->master[0] ? s->master : NULL};
        Netbroker__Result scratch = NETBROKER__RESULT__INIT;
        int r = 0;

        /* One without IPv6 settings has nothing to lock (its MTU cannot
         * rise through the caller: check_ipv6_kept). */
        for (size_t i = 0; r == 0 && i < 3; i++)
                if (which[i] && nbd_job_check_owned(job, which[i], &scratch) == 0 &&
                    (r = lock_ipv6(job, which[i], err)) == -ENOENT)
                        r = 0;
        if (scratch.message && scratch.message != protobuf_c_empty_string)
                free(scratch.message);
        return r;
}

static int run_set(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const Netbroker__LinkSet *s = op->link_set;
        struct nbd_link_change c = {
                .name = s->name,
                .up = s->state == NETBROKER__LINK_STATE__LINK_STATE_UP     ? 1
                      : s->state == NETBROKER__LINK_STATE__LINK_STATE_DOWN ? 0
                                                                           : -1,
                .mtu = s->mtu,
                .master = s->master[0] ? s->master : NULL,
                .nomaster = s->nomaster,
        };
        struct undo_link *u;
        struct nbd_link_state before;
        char old_master[IFNAMSIZ];
        struct nbd_err err;
        int r, ifindex = 0;

        if ((r = nbd_job_check_owned(job, s->name, res)) ||
            (s->master[0] && (r = recheck_master(job, s->name, s->master, res))) ||
            (r = nbd_job_check_port(job, s, res)))
                return r;
        /* An interface without IPv6 settings (its MTU went below 1280 some
         * other way: its parent's) gets the kernel's defaults once its MTU
         * rises: not through a non-root caller. Nor by a port joining or
         * leaving: a bridge whose MTU follows its ports' rises with that. */
        old_master[0] = '\0';
        if (!nbd_peer_is_root(nbd_job_peer(job))) {
                /* The bridge it leaves: one read, for the non-root caller's
                 * master changes alone (root's LinkSet reads nothing more). */
                if (s->master[0] || s->nomaster)
                        master_of(job, s->name, old_master);
                if ((r = check_ipv6_kept(job, s, old_master, res)) < 0)
                        return r;
        }
        u = calloc(1, sizeof(*u));
        if (!u)
                return nbd_result_set(res, -ENOMEM, "link set: out of memory");
        c.has_mac = s->mac[0] && nbp_mac_parse(s->mac, c.mac) == 0;
        /* Take the state to put back before changing anything. */
        r = kernel_of(job)->get_state(links_of(job), s->name, &u->state);
        if (r < 0) {
                free(u);
                return nbd_result_set(res, r, "link set: no interface %s: %s", s->name,
                                      strerror(-r));
        }
        r = kernel_of(job)->set(links_of(job), &c, &ifindex, &err);
        if (r < 0) {
                /* The kernel takes a request's changes one by one (the
                 * MAC, the MTU, up or down, then the master) and keeps
                 * those before the one it refuses: put back what was
                 * there, so that the op changes nothing. Gone: nothing
                 * of it stays. */
                int rr = kernel_of(job)->restore(links_of(job), s->name, &u->state);
                free(u);
                if (rr < 0 && rr != -ENODEV)
                        return nbd_result_set(res, r,
                                              "link set: %s; putting %s back as it was failed "
                                              "too: %s",
                                              err.msg, s->name, strerror(-rr));
                return nbd_result_set(res, r, "link set: %s", err.msg);
        }
        /* Fails closed: put back, as for the kernel's refusal. */
        if (!nbd_peer_is_root(nbd_job_peer(job)) &&
            (r = relock_ipv6(job, s, old_master, &err)) < 0) {
                kernel_of(job)->restore(links_of(job), s->name, &u->state);
                free(u);
                return nbd_result_set(res, r, "link set: router advertisements not kept off: %s",
                                      err.msg);
        }
        strcpy(u->name, s->name);
        u->ifindex = u->state.ifindex;
        before = u->state;
        res->ifindex = ifindex;
        res->ifname = strdup(s->name);
        if (!res->ifname) {
                res->ifname = (char *)protobuf_c_empty_string;
                free(u);
        } else if (nbd_job_on_failure_undo_checked(job, undo_link, free, u, before.ifindex) ==
                   0) { /* frees u */
                return 0;
        }
        /* This op fails, so no undo of it runs: put back what it changed. */
        kernel_of(job)->restore(links_of(job), s->name, &before);
        return nbd_result_set(res, -ENOMEM, "link set: out of memory");
}

/* ---- LinkDelete: one RCU wait per run of deletions ----
 * Each deletion makes the kernel wait for an RCU grace period (16-24 ms
 * here): 100 taps deleted one by one took 2 s. LinkDeletes next to each
 * other in a batch form a run: each moves its device to a link group of
 * the run's own (link.h: nbd_link_doom, a cheap change, and the place
 * where a device that is gone or cannot be deleted fails its own op), and
 * the run's last op deletes the group in one request. Until then nothing
 * is deleted: when an op of the run fails and the batch stops, the devices
 * go back to their groups and their ops say "undone". Once the group is
 * deleted, a deleted interface cannot be made again as it was (its fds,
 * its addresses, its peers are gone): LinkDelete is not undone. */

/* Groups of runs under way, one each: RUN_GROUP_BASE + a counter. */
#define RUN_GROUP_BASE 0x4e4c0000u /* "NL" */
#define RUN_GROUPS 0x10000u

struct doomed_op {
        size_t op;
        Netbroker__Result *res;
        struct nbd_link_doomed d;
};

struct delete_run {
        const struct nbd_dispatch_ctx *ctx;
        const struct nbd_backend_links *be;
        struct nbd_links *links;
        struct nbd_peer peer; /* who asked: its devices alone are deleted */
        uint32_t group;
        struct doomed_op *v; /* in the group, not yet deleted */
        size_t n, cap;
        /* The group's deletion (on the links' lane): its outcome. */
        int r;
        struct nbd_err err;
};

static const char run_key; /* nbd_job_slot()'s key */

/* A link group of the helper's own for one batch deletion. Starts at a
 * random group, so that two helpers in one namespace rarely pick the same
 * (the deletion checks the group anyway). */
static uint32_t new_group(void)
{
        static uint32_t next_group;

        if (!next_group && getrandom(&next_group, sizeof(next_group), GRND_NONBLOCK) < 0)
                next_group = (uint32_t)getpid();
        return RUN_GROUP_BASE + next_group++ % RUN_GROUPS;
}

/* The batch stopped before the group went: every device back. */
static void run_undo(struct nbd_job *job, void *data, size_t failed)
{
        struct delete_run *run = data;

        (void)failed;
        for (size_t i = 0; i < run->n; i++) {
                run->be->undoom(run->links, &run->v[i].d);
                nbd_job_mark_undone(job, run->v[i].op);
        }
        run->n = 0;
}

static void run_release(void *data)
{
        struct delete_run *run = data;

        free(run->v);
        free(run);
}

/* The name of doomed op o still names one of the caller's interfaces: a
 * device deleted meanwhile and made again by someone else under its name
 * must not go in its place. 0, or -errno with err set. */
static int still_callers(const struct delete_run *run, const struct doomed_op *o,
                         struct nbd_err *err)
{
        uid_t owner;
        int r;

        if (nbd_peer_is_root(&run->peer))
                return 0;
        r = run->be->owner(run->links, o->d.name, &owner);
        if (r == -ENOENT || (r == 0 && owner != run->peer.uid))
                r = -EPERM; /* no owner mark, or another's */
        if (r == -EPERM)
                return nbd_err_set(err, r, "uid %u no longer owns interface %s",
                                   (unsigned)run->peer.uid, o->d.name);
        if (r < 0)
                return nbd_err_set(err, r, "cannot delete %s: %s", o->d.name, strerror(-r));
        return 0;
}

/* The kernel refused the group's deletion (a device changed under us):
 * every device goes back to its group, and each still the caller's is
 * deleted on its own, so that each op has its own answer (res, when a job
 * still takes them). The index in run->v of the first that failed, or
 * SIZE_MAX. */
static size_t run_one_by_one(struct delete_run *run)
{
        size_t first_failed = SIZE_MAX;

        for (size_t i = 0; i < run->n; i++) {
                struct doomed_op *o = &run->v[i];
                struct nbd_err err;
                int r;
                run->be->undoom(run->links, &o->d);
                r = still_callers(run, o, &err);
                if (r == 0)
                        r = run->be->delete (run->links, o->d.name, &err);
                if (r == 0)
                        continue;
                if (o->res)
                        nbd_result_set(o->res, r, "link delete: %s", err.msg);
                if (first_failed == SIZE_MAX)
                        first_failed = i;
        }
        run->n = 0;
        run->r = 0;
        return first_failed;
}

/* On the loop, after a detached group deletion (the job is gone): if the
 * kernel refused it, or it never ran, no device stays in the run's group:
 * each goes on its own, as the ops that ran said it would. */
static void run_detached_done(void *data)
{
        struct delete_run *run = data;

        nbd_netlink_sent(1);
        /* Refused, or never sent (the helper stopped first): run->n > 0. */
        if (run->r < 0 || run->n) {
                for (size_t i = 0; i < run->n; i++)
                        run->v[i].res = NULL; /* their job is gone */
                run_one_by_one(run);
        }
        run_release(run);
}

/* On the links' lane: one RTM_DELLINK for the whole group. */
static void run_send(void *data)
{
        struct delete_run *run = data;

        int *ifindexes = malloc((run->n ? run->n : 1) * sizeof(*ifindexes));

        if (!ifindexes) {
                run->r = nbd_err_oom(&run->err, "deleting a link group");
                return;
        }
        for (size_t i = 0; i < run->n; i++)
                ifindexes[i] = run->v[i].d.ifindex;
        run->r = run->be->delete_group(run->links, run->group, ifindexes, run->n, &run->err);
        free(ifindexes);
        if (run->r == 0)
                run->n = 0;
}

/* The job ends with devices still doomed: its client went away in the
 * middle of the run, and the ops that ran are done, as they would be had
 * they deleted one by one. (Doomed still after a deletion the kernel
 * refused, whose outcome nobody took: back to their groups.) */
static void run_free(void *data)
{
        struct delete_run *run = data;

        if (run->n && run->r == 0) {
                nbd_dispatch_on_lane(run->ctx, NBD_NEEDS_LINKS, run_send, run_detached_done, run);
                return;
        }
        for (size_t i = 0; i < run->n; i++)
                run->be->undoom(run->links, &run->v[i].d);
        run_release(run);
}

/* The job's run under way, or NULL. */
static struct delete_run *run_now(struct nbd_job *job)
{
        void **slot = nbd_job_slot(job, &run_key);

        return slot ? *slot : NULL;
}

/* The job's run, begun by this op if none is under way. */
static struct delete_run *run_of(struct nbd_job *job)
{
        void **slot = nbd_job_slot(job, &run_key);
        struct delete_run *run;

        if (!slot)
                return NULL;
        if (*slot)
                return *slot;
        run = calloc(1, sizeof(*run));
        if (!run)
                return NULL;
        run->ctx = nbd_job_ctx(job);
        run->be = kernel_of(job);
        run->links = links_of(job);
        run->peer = *nbd_job_peer(job);
        run->group = new_group();
        if (nbd_job_on_failure_call(job, run_undo, run_free, run) < 0) /* frees run */
                return NULL;
        *slot = run;
        return run;
}

/* Back on the loop after the group's deletion. If the kernel refused it
 * (a device changed under us), the devices go back to their groups and
 * are deleted one by one, so each op still gets its own answer. */
static void run_sent(struct nbd_job *job, void *data)
{
        struct delete_run *run = data;
        size_t n = run->n;

        nbd_netlink_sent(1);
        if (run->r == 0 || run_one_by_one(run) == SIZE_MAX)
                return;
        /* The op running has its own result; an op of the run before it
         * that failed is a failure of the batch too (counted, and unless
         * the request goes on, it stops there). */
        for (size_t i = 0; i < n; i++)
                if (run->v[i].res->status && run->v[i].op != nbd_job_op_index(job))
                        nbd_job_op_failed_late(job, run->v[i].op);
}

/* The run ends at this op: its group goes, off the loop (the RCU wait). */
static void run_flush(struct nbd_job *job, struct delete_run *run)
{
        void **slot = nbd_job_slot(job, &run_key);

        if (slot)
                *slot = NULL; /* the next LinkDelete begins a new run */
        if (!run->n)
                return;
        nbd_job_lane_decides_from(job, run->v[0].op);
        nbd_job_on_lane(job, NBD_NEEDS_LINKS, run_send, run_sent, run);
}

static int run_delete(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        const char *name = op->link_delete->name;
        struct delete_run *run;
        struct nbd_err err;
        int r;

        if ((r = nbd_job_check_owned(job, name, res)) || (r = nbd_link_users_check(job, name, res)))
                goto end_of_run;
        /* The memory first: once deleted, the interface cannot be put back. */
        res->ifname = strdup(name);
        /* An earlier op of this run deletes it already. */
        run = run_now(job);
        for (size_t i = 0; run && res->ifname && i < run->n; i++)
                if (strcmp(run->v[i].d.name, name) == 0) {
                        r = nbd_result_set(res, 0,
                                           "link delete: %s is already gone (op %zu "
                                           "deletes it)",
                                           name, run->v[i].op);
                        goto end_of_run;
                }
        run = run_of(job);
        if (!res->ifname || !run) {
                if (!res->ifname)
                        res->ifname = (char *)protobuf_c_empty_string;
                r = nbd_result_set(res, -ENOMEM, "link delete: out of memory");
                goto end_of_run;
        }
        if (run->n == run->cap) {
                size_t cap = run->cap ? 2 * run->cap : 16;
                struct doomed_op *v = realloc(run->v, cap * sizeof(*v));
                if (!v) {
                        r = nbd_result_set(res, -ENOMEM, "link delete: out of memory");
                        goto end_of_run;
                }
                run->v = v;
                run->cap = cap;
        }
        run->v[run->n] = (struct doomed_op){.op = nbd_job_op_index(job), .res = res};
        r = kernel_of(job)->doom(links_of(job), name, run->group, &run->v[run->n].d, &err);
        if (r == -ENODEV) {
                /* Gone before this op: what it asks is done (idempotent). */
                r = nbd_result_set(res, 0, "link delete: %s is already gone", name);
                goto end_of_run;
        }
        if (r < 0) {
                nbd_result_set(res, r, "link delete: %s", err.msg);
                goto end_of_run;
        }
        run->n++;
end_of_run:
        /* A failure that stops the batch leaves the run to run_undo(). */
        if (r < 0 && !nbd_job_goes_on_after_failure(job))
                return r;
        if (nbd_job_next_is_same_kind(job))
                return r;
        run = run_now(job);
        if (run)
                run_flush(job, run);
        return -(int)res->status;
}

static int add_prefix(const char *prefix, const unsigned *used, size_t n_used, unsigned cursor,
                      void *data)
{
        Netbroker__NamesResult *nr = data;
        Netbroker__NamePrefix *p = malloc(sizeof(*p)), **grown;

        if (!p)
                return -ENOMEM;
        netbroker__name_prefix__init(p);
        grown = realloc(nr->prefixes, (nr->n_prefixes + 1) * sizeof(*grown));
        if (!grown) {
                free(p);
                return -ENOMEM;
        }
        nr->prefixes = grown;
        nr->prefixes[nr->n_prefixes++] = p;
        p->prefix = strdup(prefix);
        p->cursor = cursor;
        if (n_used) {
                p->used = malloc(n_used * sizeof(*p->used));
                if (!p->used)
                        return -ENOMEM;
                memcpy(p->used, used, n_used * sizeof(*p->used));
                p->n_used = n_used;
        }
        return p->prefix ? 0 : (p->prefix = (char *)protobuf_c_empty_string, -ENOMEM);
}

static int run_names_dump(struct nbd_job *job, const Netbroker__Op *op, Netbroker__Result *res)
{
        Netbroker__NamesResult *nr = malloc(sizeof(*nr));

        (void)op;
        if (!nr)
                return nbd_result_set(res, -ENOMEM, "names: out of memory");
        netbroker__names_result__init(nr);
        res->out_case = NETBROKER__RESULT__OUT_NAMES;
        res->names = nr;
        kernel_of(job)->sync(links_of(job));
        if (nbd_names_foreach(kernel_of(job)->names(links_of(job)), add_prefix, nr) < 0)
                return nbd_result_set(res, -ENOMEM, "names: out of memory");
        return 0;
}

/* One fd per queue, and a device without queues has one. */
static unsigned tap_fds(const Netbroker__Op *op)
{
        return op->tap_create->queues > 1 ? op->tap_create->queues : 1;
}

static unsigned macvtap_fds(const Netbroker__Op *op)
{
        return op->macvtap_create->queues > 1 ? op->macvtap_create->queues : 1;
}

const struct nbd_op_handler nbd_op_tap_create = {
        .name = "tap_create",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_tap,
        .run = run_tap,
        .fds = tap_fds,
};
const struct nbd_op_handler nbd_op_macvtap_create = {
        .name = "macvtap_create",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_macvtap,
        .run = run_macvtap,
        .fds = macvtap_fds,
};
const struct nbd_op_handler nbd_op_macvlan_create = {
        .name = "macvlan_create",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_macvlan,
        .run = run_macvlan,
};
const struct nbd_op_handler nbd_op_veth_create = {
        .name = "veth_create",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_veth,
        .run = run_veth,
};
const struct nbd_op_handler nbd_op_bridge_create = {
        .name = "bridge_create",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_bridge,
        .run = run_bridge,
};
const struct nbd_op_handler nbd_op_link_set = {
        .name = "link_set",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_set,
        .run = run_set,
};
const struct nbd_op_handler nbd_op_link_delete = {
        .name = "link_delete",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = validate_delete,
        .run = run_delete,
};
const struct nbd_op_handler nbd_op_names_dump = {
        .name = "names_dump",
        .needs = NBD_NEEDS_LINKS,
        .stat = NBD_STAT_OPS_LINK,
        .validate = NULL,
        .run = run_names_dump,
};
