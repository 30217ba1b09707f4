/* builtin_assets — small binary test assets, base64-encoded.
 *
 * Generated once (not copied from anywhere): a 4x4 8-bit RGB PNG with a
 * red/blue checker pattern, and a 40-sample (5 ms) 440 Hz sine as 8 kHz mono
 * 16-bit PCM WAV. Both are complete, valid files so clients that decode them
 * succeed. Static storage; never freed. */
#include "builtin_int.h"

const char builtin_png_base64[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAFklEQVR42mP4zwAE/yEkgvUfysUqAwCeow/x3VZc7g"
    "AAAABJRU5ErkJggg==";

const char builtin_wav_base64[] =
    "UklGRnQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YVAAAAAAAJUK6xPlGrIe3R5iG6oUgAv7AFj22e"
    "ye5YHhAOEo5Jzql/MK/rcIXhLYGUQeHB9GHBgWTg3wAjv4cO645v7h0OBS4znp0fEW/NEGvhCxGA==";
