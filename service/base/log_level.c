/* log_level — see log_level.h. */
#include "log_level.h"

#include <string.h>

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name, enum log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

const char *log_level_name(enum log_level level)
{
    return level >= LOG_DEBUG && level <= LOG_ERROR ? level_names[level] : "?";
}
