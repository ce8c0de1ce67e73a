#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t tu_now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Config files live until the test process exits (a respawned helper
 * reads its config again). */
static char *configs[64];
static size_t n_configs;

static void remove_configs(void)
{
        for (size_t i = 0; i < n_configs; i++) {
                unlink(configs[i]);
                free(configs[i]);
        }
        n_configs = 0;
}

char *tu_config(const char *body)
{
        char *path = strdup("/tmp/nbtest-conf-XXXXXX");
        int fd = mkstemp(path);

        if (n_configs == 0)
                atexit(remove_configs);
        if (n_configs < 64)
                configs[n_configs++] = strdup(path);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
        close(fd);
        return path;
}

void tu_helper_start(struct tu_helper *h, const char *config_body)
{
        static unsigned seq;
        char *argv[] = {(char *)NB_TEST_HELPER,
                        (char *)"--listen",
                        h->sock,
                        (char *)"--config",
                        NULL,
                        NULL};
        extern char **environ;

        h->config = tu_config(config_body);
        argv[4] = h->config;
        snprintf(h->sock, sizeof(h->sock), "/tmp/nbtest-%d-%u.sock", (int)getpid(), seq++);
        unlink(h->sock);
        ck_assert_int_eq(posix_spawn(&h->pid, NB_TEST_HELPER, NULL, NULL, argv, environ), 0);
        /* Wait for the socket to appear. */
        for (int i = 0; i < 500; i++) {
                struct stat st;
                if (stat(h->sock, &st) == 0)
                        return;
                usleep(2000);
        }
        ck_abort_msg("helper did not create %s", h->sock);
}

void tu_helper_stop(struct tu_helper *h)
{
        int status;

        kill(h->pid, SIGTERM);
        ck_assert_int_eq(waitpid(h->pid, &status, 0), h->pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "helper exit status %d",
                      status);
        unlink(h->sock);
        free(h->config);
}

int tu_raw_connect(const char *sock)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        strcpy(sa.sun_path, sock);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

int tu_raw_send(int fd, const void *body, size_t len, const int *fds, size_t nfds)
{
        struct nb_frame_out *f;
        int r = nb_frame_out_new(len, &f);

        ck_assert_int_eq(r, 0);
        memcpy(f->buf + NB_FRAME_HEADER_SIZE, body, len);
        /* The frame closes the fds it sent: give it copies. */
        for (size_t i = 0; i < nfds; i++)
                f->fds[f->nfds++] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
        do
                r = nb_frame_write(fd, f);
        while (r == 0);
        nb_frame_out_free(f);
        return r < 0 ? r : 0;
}

int tu_raw_send_msg(int fd, const ProtobufCMessage *m, const int *fds, size_t nfds)
{
        size_t len = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(len + 1);
        int r;

        protobuf_c_message_pack(m, buf);
        r = tu_raw_send(fd, buf, len, fds, nfds);
        free(buf);
        return r;
}

Netbroker__ServerMessage *tu_raw_recv(int fd, int *ret_err)
{
        struct nb_frame_reader rd;
        Netbroker__ServerMessage *m;
        uint8_t *body;
        size_t len, nfds;
        int fds[NB_FRAME_MAX_FDS];
        bool trunc;
        int r;

        nb_frame_reader_init(&rd, 64u << 20, NB_FRAME_MAX_FDS);
        do
                r = nb_frame_read(fd, &rd);
        while (r == 0);
        if (r < 0) {
                nb_frame_reader_reset(&rd);
                if (ret_err)
                        *ret_err = r;
                return NULL;
        }
        nb_frame_reader_take(&rd, &body, &len, fds, &nfds, &trunc);
        nb_close_fds(fds, nfds);
        m = netbroker__server_message__unpack(NULL, len, body);
        free(body);
        if (ret_err)
                *ret_err = m ? 0 : -EBADMSG;
        return m;
}

void tu_raw_hello(int fd)
{
        Netbroker__ClientMessage m = NETBROKER__CLIENT_MESSAGE__INIT;
        Netbroker__Hello h = NETBROKER__HELLO__INIT;
        Netbroker__ServerMessage *r;

        h.version = NB_PROTOCOL_VERSION;
        m.msg_case = NETBROKER__CLIENT_MESSAGE__MSG_HELLO;
        m.hello = &h;
        ck_assert_int_eq(tu_raw_send_msg(fd, &m.base, NULL, 0), 0);
        r = tu_raw_recv(fd, NULL);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->msg_case, NETBROKER__SERVER_MESSAGE__MSG_HELLO);
        netbroker__server_message__free_unpacked(r, NULL);
}

int tu_fd_count(pid_t pid)
{
        char path[64];
        DIR *d;
        struct dirent *e;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        /* Our own opendir fd is counted when pid is us. */
        return pid == getpid() ? n - 1 : n;
}

static int scan_children(pid_t pid, bool zombies_only)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((e = readdir(d))) {
                char path[300], buf[512], state;
                int ppid;
                FILE *f;
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (fgets(buf, sizeof(buf), f)) {
                        char *p = strrchr(buf, ')');
                        if (p && sscanf(p + 2, "%c %d", &state, &ppid) == 2 && ppid == pid &&
                            (!zombies_only || state == 'Z'))
                                n++;
                }
                fclose(f);
        }
        closedir(d);
        return n;
}

bool tu_process_alive(pid_t pid)
{
        char path[64], buf[512], state = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (fgets(buf, sizeof(buf), f)) {
                char *p = strrchr(buf, ')');
                if (p)
                        state = p[2];
        }
        fclose(f);
        return state != 0 && state != 'Z' && state != 'X';
}

int tu_zombies_of(pid_t pid)
{
        return scan_children(pid, true);
}

int tu_children_of(pid_t pid)
{
        return scan_children(pid, false);
}

const char *tu_read_file(const char *path)
{
        static char buf[16384];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        ck_assert_int_ge(fd, 0);
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        ck_assert_int_ge(n, 0);
        buf[n] = '\0';
        return buf;
}

nb_conn *tu_spawn(const char *config_body)
{
        char *conf = tu_config(config_body);
        nb_spawn_opts o = {.config_path = conf};
        nb_conn *c = NULL;
        int r = nb_spawn(NB_TEST_HELPER, &o, &c);

        free(conf);
        ck_assert_msg(r == 0, "nb_spawn: %s", strerror(-r));
        return c;
}
