#!/usr/bin/env python3
"""Rewrites a generated matmul_wgmma source whose producer warps transpose an FP8 operand in the
kernel (emit_transposer) so that each warp handles U of its 4x4-byte blocks per step: the loads
of all U first, then their byte permutes and stores, where wg_tnsp_block does one block's four
loads, permutes and stores before the next block's loads (its shared-memory accesses are
asm-ordered, so steps do not overlap). A device-side experiment for issue 41's B [K,N] decode
row (session 16: 31 us against cuBLAS's 19 on its column-major copy).

    tnsp_multi.py IN.cu OUT.cu U

It also takes the emulator's rewrite of a source (tuner/tests/emu, kern.cu), to check the result
on the CPU before device time.
"""
import re
import sys

HELPER = """%(prefix)s void wg_tnsp_multi(hd_u32 raw, hd_u32 dst, int l, int q0, int qend) {
const int k0 = 4 * l;
hd_u32 w[%(u)d][4];
#pragma unroll
for (int u = 0; u < %(u)d; u++) {
const int q = q0 + %(step)d * u;
if (q < qend) {
const int m0 = 4 * ((l + (q & 31)) & 31);
const hd_u32 rb = raw + (hd_u32)(q >> 5) * 16384u;
#pragma unroll
for (int i = 0; i < 4; i++)
w[u][i] = wg_lds32(rb + (hd_u32)((k0 + i) * 128 + ((((m0 >> 4) ^ ((k0 + i) & 7)) << 4) | (m0 & 15))));
}
}
#pragma unroll
for (int u = 0; u < %(u)d; u++) {
const int q = q0 + %(step)d * u;
if (q < qend) {
const int m0 = 4 * ((l + (q & 31)) & 31);
const hd_u32 db = dst + (hd_u32)(q >> 5) * 16384u;
hd_u32 o[4];
hd_bytes_4x4(w[u], o);
#pragma unroll
for (int j = 0; j < 4; j++)
wg_sts32(db + (hd_u32)((m0 + j) * 128 + ((((k0 >> 4) ^ ((m0 + j) & 7)) << 4) | (k0 & 15))), o[j]);
}
}
}
"""

LOOP = re.compile(r"for \(int wg_q = wg_tw; wg_q < (\d+); wg_q \+= (\d+)\)\n"
                  r"wg_tnsp_block\((.+?) \+ \(hd_u32\)\(wg_q >> 5\) \* 16384u, (.+?) \+ \(hd_u32\)\(wg_q >> 5\) \* "
                  r"16384u, wg_tl, wg_q & 31\);")


def main():
    src, dst, u = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = open(src).read()
    loops = LOOP.findall(s)
    if not loops:
        sys.exit(f"{src}: no transposer loop")
    step = int(loops[0][1])

    def call(m):
        end, st, raw, out = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        return (f"for (int wg_q = wg_tw; wg_q < {end}; wg_q += {st * u})\n"
                f"wg_tnsp_multi({raw}, {out}, wg_tl, wg_q, {end});")
    s = LOOP.sub(call, s)
    # The generated source's helpers are HD_INLINE; the emulator's rewrite of it (emu_dyn.c)
    # makes them static inline: the new helper goes before wg_tnsp_block, spelt the same.
    m = re.search(r"^(HD_INLINE|static inline) void wg_tnsp_block\(", s, re.M)
    s = s[:m.start()] + HELPER % {"u": u, "step": step, "prefix": m.group(1)} + s[m.start():]
    open(dst, "w").write(s)


if __name__ == "__main__":
    main()
