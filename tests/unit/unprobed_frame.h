/* unprobed_frame — a large stack frame built without stack-clash probes, as
 * a library mcpd calls may be built (unprobed_frame.c is compiled with
 * -fno-stack-clash-protection). test_fiber runs it at the bottom of a
 * fiber's stack to see that the guard alone makes it fault. */
#ifndef MCPD_TEST_UNPROBED_FRAME_H
#define MCPD_TEST_UNPROBED_FRAME_H

/* The frame's size: larger than a page, smaller than the fibers' guard. */
#define UNPROBED_FRAME_SIZE (32 * 1024)

/* Writes only the lowest byte of an UNPROBED_FRAME_SIZE local array (the
 * first store a function with such a frame makes can be at its bottom),
 * and returns it. */
int unprobed_frame(void);

#endif
