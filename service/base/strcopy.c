/* strcopy — see strcopy.h. */
#include "strcopy.h"

#include <string.h>

size_t strcopy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return n;
}
