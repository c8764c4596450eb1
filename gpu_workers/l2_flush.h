/* gpu_workers/l2_flush.h - the kernel that empties the L2 between a candidate's timed runs.
 *
 * It reads a buffer of twice the L2's size and keeps nothing, so the L2 afterwards holds clean
 * lines of that buffer only: the next run finds none of its own data cached and evicts nothing
 * that must be written back. (A memset leaves the L2 full of dirty lines instead, and their
 * write-back then falls inside the timed run: it charged memory-bound candidates several
 * microseconds of DRAM traffic that is not theirs, and ranked weight-streaming GEMMs wrongly.)
 *
 * PTX text, so that the measurer needs no compiler: the driver JITs it once per worker.
 * Parameters: (const uint4 *buf, uint64 n), n = 16-byte words to read; any 1-D launch covers the
 * buffer (grid-stride loop). The buffer must be zero-filled: what is read is XORed and stored to
 * buf[0] only when it equals a constant that zeros never give, so the loads cannot be dropped.
 */
#ifndef HIDETD_GW_L2_FLUSH_H
#define HIDETD_GW_L2_FLUSH_H

#define GW_L2_FLUSH_KERNEL "hidetd_l2_flush"

extern const char gw_l2_flush_ptx[];

#endif
