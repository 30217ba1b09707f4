/* stdio_transport — see stdio_transport.h.
 *
 * A fiber on the event loop reads, as a WebSocket's reader does: it parks
 * (loop_wait_fd) on one epoll set holding in_fd, a signalfd for the stop
 * signals and out_fd (for its error condition only: a pipe whose reader
 * closed reports EPOLLERR, so a vanished client is seen even while stdin is
 * quiet). A regular file cannot be polled and is always readable, so a
 * stdin that is one is read without waiting. The caller's thread only
 * waits for that fiber to finish. Writes come from push's writer and from
 * the reader (framing errors), both loop fibers that wait for a full stdout
 * with loop_wait_fd, serialised by out.mu; each is one writev of prefix,
 * message and suffix, so frames never interleave. */
#include "stdio_transport.h"
#include "fd_write.h"
#include "clock.h"
#include "fcond.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "note_gate.h"
#include "push.h"
#include "stdio_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define READ_CHUNK (64 * 1024)
/* A writer waiting for a slow reader re-checks its deadline this often. */
#define WRITE_TICK_MS 200

struct out {
    int fd;
    int sfd; /* the stop signals: polled (never read) by a waiting writer */
    int64_t grace_ms;
    struct fmutex mu; /* one frame at a time (held across a wait); guards what follows */
    enum stdio_framing framing;
    int dead; /* out_fd is gone or gave up: every send fails at once */
    /* 0 while writers wait for the reader as long as it takes; otherwise
     * the monotonic time at which a blocked write gives up (set at EOF or
     * on a stop signal, so a client that never reads cannot hold us). */
    _Atomic int64_t give_up_at;
    struct note_gate gate; /* a result waits for the progress before it */
};

/* Messages larger than this are not parsed to see whether they are
 * notifications (note_gate.h; progress and most others are small). */
#define NOTE_MAX 8192

static int is_notification(const char *msg, size_t len)
{
    if (len > NOTE_MAX)
        return 0;
    json_t *m = json_loadb(msg, len, 0, NULL);
    int note = json_is_object(m) && json_object_get(m, "method") && !json_object_get(m, "id");
    json_decref(m);
    return note;
}

static void give_up_after_grace(struct out *o)
{
    int64_t none = 0;
    atomic_compare_exchange_strong(&o->give_up_at, &none, clock_mono_ms() + o->grace_ms);
}

/* fd_write's wait (on a loop fiber): until out_fd takes more bytes. 0,
 * or -1 when it never will. */
static int wait_writable(void *ud)
{
    struct out *o = ud;
    int watch_signal = 1;
    for (;;) {
        int64_t give_up = atomic_load(&o->give_up_at), now = clock_mono_ms();
        if (give_up && now >= give_up)
            return -1;
        int64_t tick = give_up && give_up - now < WRITE_TICK_MS ? give_up - now : WRITE_TICK_MS;
        int rc = loop_wait_fd(o->fd, EPOLLOUT, now + tick);
        if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
            return -1;
        /* Look at the signal without waiting (it stays pending for the
         * reader); once noted, stop looking. */
        struct pollfd sig = {.fd = o->sfd, .events = POLLIN};
        if (watch_signal && !give_up && poll(&sig, 1, 0) > 0 && (sig.revents & POLLIN)) {
            give_up_after_grace(o);
            watch_signal = 0;
            log_event(LOG_INFO, NULL, "shutting_down",
                      "stop signal while the client is not reading; giving up in %lld ms",
                      (long long)o->grace_ms);
        }
        if (rc == 0)
            return 0; /* a hang-up shows as EPIPE on the write */
    }
}

/* push_io.send: one message as one frame in the detected framing. */
static int out_send(void *arg, const char *msg, size_t len)
{
    struct out *o = arg;
    int rc = -1;
    fmutex_lock(&o->mu);
    if (!o->dead) {
        note_gate_before(&o->gate, is_notification(msg, len));
        char prefix[STDIO_FRAME_PREFIX_MAX];
        size_t pl = stdio_frame_prefix(o->framing, len, prefix, sizeof prefix);
        const char *suffix = stdio_frame_suffix(o->framing);
        struct iovec iov[3] = {
            {.iov_base = prefix, .iov_len = pl},
            {.iov_base = (void *)msg, .iov_len = len},
            {.iov_base = (void *)suffix, .iov_len = strlen(suffix)},
        };
        rc = fd_write_all(o->fd, 0, iov, 3, wait_writable, o);
        if (rc != 0) {
            int e = errno;
            o->dead = 1;
            log_event(LOG_WARN, NULL, "stdio_output_closed", "cannot write to stdout (%s)",
                      e == EAGAIN || e == EWOULDBLOCK ? "client stopped reading" : strerror(e));
        }
    }
    fmutex_unlock(&o->mu);
    return rc;
}

static int out_dead(struct out *o)
{
    fmutex_lock(&o->mu);
    int dead = o->dead;
    fmutex_unlock(&o->mu);
    return dead;
}

/* The decoder decides the framing before it yields anything, so replies,
 * which only follow messages, always find it set. */
static void sync_framing(struct out *o, const struct stdio_frame_decoder *dec)
{
    enum stdio_framing f = stdio_frame_framing(dec);
    fmutex_lock(&o->mu);
    int changed = o->framing != f;
    o->framing = f;
    fmutex_unlock(&o->mu);
    if (changed)
        log_event(LOG_INFO, NULL, "stdio_framing", "client uses %s",
                  f == STDIO_FRAMING_CONTENT_LENGTH ? "Content-Length framing"
                                                    : "newline-delimited JSON");
}

static void handle(struct out *o, struct push *p, const struct stdio_frame_event *ev, size_t max)
{
    if (ev->kind == STDIO_FRAME_MESSAGE) {
        push_receive(p, ev->data, ev->len);
        return;
    }
    char message[160];
    if (ev->error == STDIO_FRAME_ERR_TOO_LARGE)
        snprintf(message, sizeof message, "Invalid Request: message larger than %zu bytes", max);
    else
        snprintf(message, sizeof message, "%s", stdio_frame_error_message(ev->error));
    log_event(LOG_WARN, NULL, "stdio_bad_frame", "%s", message);
    json_t *err = jsonrpc_error(NULL, stdio_frame_error_code(ev->error), message, NULL);
    size_t len;
    char *text = err ? jsonrpc_dump(err, &len) : NULL;
    json_decref(err);
    if (text)
        out_send(o, text, len);
    free(text);
}

/* Non-blocking writes on a pipe or socket let a writer give up on a client
 * that never reads. Terminals and files are left alone (they do not block
 * forever, and their flags may be shared with other processes). Returns
 * the flags to restore, or -1 when nothing was changed. */
static int make_nonblocking(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !(S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode)))
        return -1;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_NONBLOCK))
        return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 ? flags : -1;
}

/* What the reader waits on: one epoll set, which a fiber can wait on with
 * one loop_wait_fd. in_always: in_fd could not be added (a regular file,
 * always readable; or a bad descriptor, whose read says so). */
struct watch {
    int ep;
    int in_fd;
    int in_always;
    int sfd;
    int out_fd;
};

static int watch_open(struct watch *w, int in_fd, int sfd, int out_fd)
{
    *w = (struct watch){
        .ep = epoll_create1(EPOLL_CLOEXEC), .in_fd = in_fd, .sfd = sfd, .out_fd = out_fd};
    if (w->ep < 0)
        return -1;
    struct epoll_event in = {.events = EPOLLIN, .data.fd = in_fd};
    w->in_always = epoll_ctl(w->ep, EPOLL_CTL_ADD, in_fd, &in) != 0;
    struct epoll_event sig = {.events = EPOLLIN, .data.fd = sfd};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, sfd, &sig) != 0) {
        close(w->ep);
        return -1;
    }
    /* Errors and hang-ups only. A file for stdout cannot be added, and
     * never hangs up. */
    struct epoll_event out = {.events = 0, .data.fd = out_fd};
    (void)epoll_ctl(w->ep, EPOLL_CTL_ADD, out_fd, &out);
    return 0;
}

enum ending { END_EOF, END_SIGNAL, END_OUTPUT };

/* Decodes what was read and hands each message to push. */
static void feed(struct out *o, struct push *p, struct stdio_frame_decoder *dec, const char *buf,
                 size_t n, size_t max)
{
    size_t off = 0;
    while (off < n) {
        size_t used;
        struct stdio_frame_event ev;
        int got = stdio_frame_decode(dec, buf + off, n - off, &used, &ev);
        off += used;
        sync_framing(o, dec);
        if (got)
            handle(o, p, &ev, max);
    }
}

/* Reads stdin until end of input, a stop signal, or a client gone from
 * stdout; says which. */
static enum ending read_until_end(const struct watch *w, struct out *o, struct push *p,
                                  struct stdio_frame_decoder *dec, char *buf, size_t max)
{
    for (;;) {
        if (out_dead(o))
            return END_OUTPUT;
        struct epoll_event evs[3];
        int n = epoll_wait(w->ep, evs, 3, 0);
        if (n < 0 && errno != EINTR) {
            log_event(LOG_ERROR, NULL, "stdio_poll_failed", "%s", strerror(errno));
            return END_EOF;
        }
        int readable = w->in_always, signalled = 0, out_gone = 0;
        for (int i = 0; i < n; i++) {
            readable |= evs[i].data.fd == w->in_fd;
            signalled |= evs[i].data.fd == w->sfd;
            out_gone |= evs[i].data.fd == w->out_fd && (evs[i].events & (EPOLLERR | EPOLLHUP));
        }
        if (signalled) {
            struct signalfd_siginfo si;
            ssize_t got = read(w->sfd, &si, sizeof si);
            log_event(LOG_INFO, NULL, "shutting_down", "signal %d",
                      got == (ssize_t)sizeof si ? (int)si.ssi_signo : 0);
            return END_SIGNAL;
        }
        if (out_gone) {
            log_event(LOG_INFO, NULL, "stdio_output_closed", "stdout was closed by the client");
            return END_OUTPUT;
        }
        if (!readable) {
            int rc = loop_wait_fd(w->ep, EPOLLIN, -1);
            if (rc != 0 && rc != EINTR) {
                log_event(LOG_ERROR, NULL, "stdio_poll_failed", "%s", strerror(rc));
                return rc == ECANCELED ? END_SIGNAL : END_EOF;
            }
            continue;
        }
        ssize_t got = read(w->in_fd, buf, READ_CHUNK);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (got <= 0) {
            if (got < 0)
                log_event(LOG_WARN, NULL, "stdio_read_failed", "stdin: %s", strerror(errno));
            return END_EOF;
        }
        feed(o, p, dec, buf, (size_t)got, max);
    }
}

/* The reader fiber's state, and how the caller's thread learns it ended. */
struct serve {
    struct watch w;
    struct out o;
    struct push *p;
    struct stdio_frame_decoder *dec;
    char *buf;
    size_t max;
    int64_t grace;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
};

static void serve_main(void *arg)
{
    struct serve *sv = arg;
    struct out *o = &sv->o;
    enum ending why = read_until_end(&sv->w, o, sv->p, sv->dec, sv->buf, sv->max);
    if (why == END_EOF) {
        struct stdio_frame_event ev;
        int got = stdio_frame_finish(sv->dec, &ev);
        sync_framing(o, sv->dec);
        if (got)
            handle(o, sv->p, &ev, sv->max);
        log_event(LOG_INFO, NULL, "stdio_eof", "end of input; finishing requests in flight");
    }
    /* Requests in flight finish and are answered; a client that stopped
     * reading holds nobody (neither the drain nor the writer, which
     * push_close joins) beyond the same deadline. At the end of input
     * nothing the client was asked can be answered now. */
    give_up_after_grace(o);
    int reads = why != END_OUTPUT;
    if (push_close(sv->p, why == END_EOF, reads ? sv->grace : 0) != 0 && reads && !out_dead(o))
        log_event(LOG_WARN, NULL, "stdio_drain_timeout",
                  "requests still running after %lld ms; their replies stay in their streams",
                  (long long)sv->grace);
    pthread_mutex_lock(&sv->mu);
    sv->done = 1;
    pthread_cond_signal(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
}

int stdio_serve(int in_fd, int out_fd, const struct stdio_config *cfg, const sigset_t *stop)
{
    size_t max = cfg->max_message ? cfg->max_message : STDIO_FRAME_DEFAULT_MAX;
    int sfd = signalfd(-1, stop, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        log_event(LOG_ERROR, NULL, "stdio_failed", "signalfd: %s", strerror(errno));
        return 1;
    }
    struct serve *sv = calloc(1, sizeof *sv);
    if (!sv || watch_open(&sv->w, in_fd, sfd, out_fd) != 0) {
        log_event(LOG_ERROR, NULL, "stdio_failed", "%s", sv ? strerror(errno) : "out of memory");
        free(sv);
        close(sfd);
        return 1;
    }
    sv->max = max;
    sv->grace = cfg->grace_ms > 0 ? cfg->grace_ms : 0;
    struct out *o = &sv->o;
    o->fd = out_fd;
    o->sfd = sfd;
    o->grace_ms = sv->grace;
    fmutex_init(&o->mu);
    atomic_init(&o->give_up_at, 0);
    note_gate_init(&o->gate, out_fd);
    pthread_mutex_init(&sv->mu, NULL);
    pthread_cond_init(&sv->cv, NULL);
    struct push_io io = {.send = out_send, .io = o, .transport = "stdio", .event_ids = 0};
    sv->dec = stdio_frame_decoder_new(max);
    sv->buf = malloc(READ_CHUNK);
    sv->p = sv->dec && sv->buf ? push_open(&io, NULL) : NULL;
    int saved_flags = sv->p ? make_nonblocking(out_fd) : -1;
    int status = 0;
    if (!sv->p || loop_spawn(serve_main, sv) != 0) {
        log_event(LOG_ERROR, NULL, "stdio_failed",
                  sv->p ? "cannot start the reader" : "out of memory");
        push_close(sv->p, 0, 0);
        status = 1;
    } else {
        log_event(LOG_INFO, NULL, "stdio_serving", "MCP on stdin/stdout, messages up to %zu bytes",
                  max);
        pthread_mutex_lock(&sv->mu);
        while (!sv->done)
            pthread_cond_wait(&sv->cv, &sv->mu);
        pthread_mutex_unlock(&sv->mu);
    }
    if (saved_flags >= 0)
        fcntl(out_fd, F_SETFL, saved_flags);
    stdio_frame_decoder_free(sv->dec);
    free(sv->buf);
    fmutex_destroy(&o->mu);
    pthread_mutex_destroy(&sv->mu);
    pthread_cond_destroy(&sv->cv);
    close(sv->w.ep);
    close(sfd);
    free(sv);
    return status;
}
