#include "note_gate.h"

#include "fiber.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

enum { UNCOUNTED, PIPE, SOCKET };

void note_gate_init(struct note_gate *g, int fd)
{
    *g = (struct note_gate){.fd = fd, .kind = UNCOUNTED};
    struct stat sb;
    if (fstat(fd, &sb) == 0)
        g->kind = S_ISFIFO(sb.st_mode) ? PIPE : S_ISSOCK(sb.st_mode) ? SOCKET : UNCOUNTED;
}

long note_gate_unread(const struct note_gate *g)
{
    int n = 0;
    if (g->kind == PIPE && ioctl(g->fd, FIONREAD, &n) == 0)
        return n;
    if (g->kind == SOCKET && ioctl(g->fd, SIOCOUTQ, &n) == 0)
        return n;
    return -1;
}

void note_gate_before(struct note_gate *g, int is_note)
{
    int wait = g->note_unread && !is_note;
    g->note_unread = is_note;
    for (int waited = 0; wait; waited++) {
        if (note_gate_unread(g) <= 0) {
            g->lapsed = 0;
            return;
        }
        if (g->lapsed || waited >= NOTE_GATE_MS) {
            g->lapsed = 1;
            return;
        }
        fiber_sleep_ms(1);
    }
}
