/* note_gate — holds a message that follows a notification until the
 * client has read that notification, on a stdio channel (mcpd --stdio's
 * stdout, mcp-bridge's).
 *
 * Why: the official TypeScript SDK handles a notification a tick after it
 * reads it, but a response at once, and the response removes the request's
 * progress handler. A progress notification read in the same chunk as its
 * result therefore finds no handler and is dropped. Waiting until the pipe
 * or socket is empty before writing the result puts them in separate reads.
 *
 * How: the bytes the reader has not taken yet are FIONREAD on a pipe and
 * SIOCOUTQ on a stream socket; other descriptors (a file, a terminal) are
 * never waited for. A wait looks every millisecond (fiber_sleep_ms: a fiber
 * parks, a thread sleeps) for at most NOTE_GATE_MS. Once a wait runs out
 * (a client that does not read), none is made until the channel is seen
 * empty again, so a stalled client costs one wait, not one a message. */
#ifndef MCPD_NOTE_GATE_H
#define MCPD_NOTE_GATE_H

#define NOTE_GATE_MS 50

struct note_gate {
    int fd;
    int kind;        /* 0: cannot be counted; 1: pipe; 2: socket */
    int note_unread; /* the last message written was a notification */
    int lapsed;      /* a wait ran out */
};

/* fd: the descriptor messages are written to. */
void note_gate_init(struct note_gate *g, int fd);

/* Before writing a message (is_note: whether it is a notification): waits
 * as described above when the message before it was a notification and
 * this one is not. Call with the channel's write lock held. */
void note_gate_before(struct note_gate *g, int is_note);

/* Bytes written to fd that its reader has not taken, or -1 when that cannot
 * be told (for tests). */
long note_gate_unread(const struct note_gate *g);

#endif
