// SPDX-License-Identifier: LGPL-2.1-or-later
/* One setter for struct nbd_err; see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int nbd_err_set(struct nbd_err *e, int code, const char *fmt, ...)
{
        va_list ap;

        if (code >= 0)
                code = -EIO;
        if (!e)
                return code;
        e->code = code;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        return code;
}

int nbd_err_oom(struct nbd_err *e, const char *what)
{
        return nbd_err_set(e, -ENOMEM, "out of memory %s", what);
}

void nbd_err_clear(struct nbd_err *e)
{
        e->code = 0;
        e->msg[0] = '\0';
}
