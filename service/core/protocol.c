/* protocol — see protocol.h. */
#include "protocol.h"

#include <stddef.h>
#include <string.h>

/* 2024-11-05 is the revision of the legacy HTTP+SSE transport (/sse); its
 * messages are those of 2025-03-26 without batches. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
#define NVERSIONS (sizeof versions / sizeof versions[0])

static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                     "error", "critical", "alert",  "emergency"};

int protocol_supported(const char *version)
{
    for (size_t i = 0; version && i < NVERSIONS; i++)
        if (strcmp(version, versions[i]) == 0)
            return 1;
    return 0;
}

const char *protocol_negotiate(const char *requested)
{
    for (size_t i = 0; requested && i < NVERSIONS; i++)
        if (strcmp(requested, versions[i]) == 0)
            return versions[i];
    return PROTOCOL_LATEST;
}

int protocol_allows_batch(const char *version)
{
    return strcmp(version, "2025-03-26") == 0;
}

int protocol_has_sse_polling(const char *version)
{
    /* ISO dates compare as strings. */
    return strcmp(version, "2025-11-25") >= 0;
}

int protocol_log_level(const char *name)
{
    for (int i = 0; name && i < 8; i++)
        if (strcmp(name, levels[i]) == 0)
            return i;
    return -1;
}

const char *protocol_log_level_name(int level)
{
    return level >= 0 && level < 8 ? levels[level] : "debug";
}
