/* tsan_suppressions — built into every binary of an MCPD_TSAN build, so
 * the suppressions hold however the binary is started (the SDK's stdio
 * transport, for one, starts mcpd without the caller's environment).
 *
 * jansson's reference counting: json_incref/json_decref (inline in
 * jansson.h) read json->refcount with a plain load before the atomic
 * update, and decrement with __ATOMIC_RELEASE only, so the thread that
 * frees a value has no acquire edge to another thread's earlier decrement.
 * mcpd hands request values between threads by reference (a call's request
 * outlives the reading thread's reference), and TSan reports each such
 * pair. The counts themselves are atomic. The last decrement frees the
 * value inside libjansson (json_delete, whose frames have no symbols in
 * Debian's build), so the library is named as a module too. A real use
 * after free is a different report (heap-use-after-free), not suppressed,
 * and ASan covers the same paths in the main e2e run. */
const char *__tsan_default_suppressions(void);

const char *__tsan_default_suppressions(void)
{
    return "race:json_incref\n"
           "race:json_decref\n"
           "race:json_delete\n"
           "race:libjansson.so\n";
}
