/* token_bucket — see token_bucket.h. */
#include "token_bucket.h"

void token_bucket_init(struct token_bucket *b, double rate, double burst, int64_t now_ms)
{
    b->rate = rate;
    b->burst = burst < 1 ? 1 : burst;
    b->tokens = b->burst;
    b->last_ms = now_ms;
    b->dropped = 0;
}

/* Adds what elapsed since the last refill earned; a clock that stepped
 * back earns nothing and keeps the refill point. */
static void refill(struct token_bucket *b, int64_t now_ms)
{
    if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * b->rate / 1000.0;
        if (b->tokens > b->burst)
            b->tokens = b->burst;
        b->last_ms = now_ms;
    }
}

int token_bucket_take(struct token_bucket *b, int64_t now_ms)
{
    if (b->rate <= 0)
        return 1;
    refill(b, now_ms);
    if (b->tokens >= 1) {
        b->tokens -= 1;
        return 1;
    }
    b->dropped++;
    return 0;
}

void token_bucket_give(struct token_bucket *b, int64_t now_ms)
{
    if (b->rate <= 0)
        return;
    refill(b, now_ms);
    b->tokens = b->tokens + 1 > b->burst ? b->burst : b->tokens + 1;
}

uint64_t token_bucket_take_dropped(struct token_bucket *b)
{
    uint64_t n = b->dropped;
    b->dropped = 0;
    return n;
}
