/* fnv1a — see fnv1a.h. */
#include "fnv1a.h"

#include <string.h>

uint32_t fnv1a(const void *p, size_t n, uint32_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

uint32_t fnv1a_str(const char *s)
{
    return fnv1a(s, strlen(s), FNV1A_SEED);
}
