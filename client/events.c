// SPDX-License-Identifier: LGPL-2.1-or-later
/* Events from the helper (netbroker.h, "events"): kept under the
 * connection's lock as they are read, whichever thread reads them, and
 * handed to the callback by nb_conn_dispatch() without the lock, like the
 * requests' callbacks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

static void drop_list(struct conn_event *e)
{
        while (e) {
                struct conn_event *next = e->next;
                free(e);
                e = next;
        }
}

void conn_event_file(nb_conn *c, const Netbroker__Event *ev)
{
        const Netbroker__TableDeleted *td;
        struct conn_event *e;

        /* A kind this library does not know: a newer helper's, dropped. */
        if (!c->event_cb || ev->ev_case != NETBROKER__EVENT__EV_TABLE_DELETED)
                return;
        td = ev->table_deleted;
        /* The helper's three tables alone (a helper that sent others would
         * be lying): the list holds three at most, and names a callback
         * prints are known text. */
        if (!td->table || !((td->family == 5 && (strcmp(td->table, "netbroker") == 0 ||
                                                 strcmp(td->table, "netbroker_bw") == 0)) ||
                            (td->family == 1 && strcmp(td->table, "netbroker_net") == 0)))
                return;
        /* One of the table waiting stands for this one too: a daemon that
         * is slow to dispatch does not make the list grow. */
        for (e = c->events; e; e = e->next)
                if (e->family == td->family && strcmp(e->table, td->table) == 0)
                        return;
        e = calloc(1, sizeof(*e));
        if (!e)
                return; /* the daemon's next ensure finds it anyway */
        e->kind = NB_EVENT_TABLE_DELETED;
        e->family = td->family;
        strcpy(e->table, td->table);
        *c->events_tail = e;
        c->events_tail = &e->next;
        conn_notify(c);
}

int conn_events_run(nb_conn *c)
{
        struct conn_event *list;
        nb_event_callback cb;
        void *opaque;
        int n = 0;

        pthread_mutex_lock(&c->lock);
        list = c->events;
        c->events = NULL;
        c->events_tail = &c->events;
        /* Closed (nb_close() from a callback, finished by this dispatch):
         * the daemon may have freed what opaque points to. */
        cb = c->closing ? NULL : c->event_cb;
        opaque = c->event_opaque;
        pthread_mutex_unlock(&c->lock);
        for (struct conn_event *e = list; e && cb; e = e->next, n++) {
                nb_event ev = {.kind = e->kind, .family = (int)e->family, .table = e->table};
                cb(c, &ev, opaque);
        }
        drop_list(list);
        return n;
}

void conn_events_free(nb_conn *c)
{
        drop_list(c->events);
        c->events = NULL;
        c->events_tail = &c->events;
}

NB_EXPORT int nb_conn_on_event(nb_conn *c, nb_event_callback cb, void *opaque)
{
        if (!c)
                return -EINVAL;
        if (conn_check_owner(c) < 0)
                return -ECHILD; /* the lock may be held for ever: nb_conn_has_feature() */
        pthread_mutex_lock(&c->lock);
        c->event_cb = cb;
        c->event_opaque = opaque;
        if (!cb)
                conn_events_free(c);
        pthread_mutex_unlock(&c->lock);
        return 0;
}
