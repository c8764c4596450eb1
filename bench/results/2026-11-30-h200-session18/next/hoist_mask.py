#!/usr/bin/env python3
"""hoist_mask.py IN.cu OUT.cu [--fence] [--no-hoist] - experiments on attention_wgmma (session 18).

Hoist (default): the staged mask (call k:
the consumers' short-scoreboard stalls rose from 0.59 to 0.80 per instruction with the mask, each
8-byte shared load of it used by the FMA right after it). Rewrites a generated kernel so that each
key tile's mask values are loaded into registers before the wait for that tile's Q.K^T (the
wgmma's time covers the loads' latency) and only the FMAs stay after it. The stage index wg_s is
the same at both places (it advances after the softmax).

--fence: each key tile's wgmma fence (warpgroup.arrive) moved from before the wait for the
stage's full barrier to after it, right before the Q.K^T wgmma, as CUTLASS places it. With the
fence before the wait's loop ptxas injects a warpgroup.arrive of its own at the first Q.K^T wgmma
(ptxas info C7519, two places in every attention_wgmma kernel, none in matmul_wgmma's); with it
after, ptxas injects none.

Developer-only: nvcc builds OUT.cu, and kbench checks it against the kernel's reference and times
it beside the unchanged build."""
import re
import sys

src = open(sys.argv[1]).read()
fence, hoist = "--fence" in sys.argv[3:], "--no-hoist" not in sys.argv[3:]
if fence:
    old = "wg_fence();\nwg_wait(wg_bar0 + 8 * wg_s, wg_ph);\n"
    if old not in src:
        sys.exit("hoist_mask.py: no fence before a stage wait in " + sys.argv[1])
    src = src.replace(old, "wg_wait(wg_bar0 + 8 * wg_s, wg_ph);\nwg_fence();\n")
block = re.compile(
    r"\{\nconst hd_u32 aw_mks = (?P<addr>[^;]+);\n#pragma unroll\nfor \(int j = 0; j < (?P<n>\d+); j\+\+\) \{\n"
    r"float aw_k0, aw_k1;\n"
    r"asm volatile\(\"ld\.shared\.v2\.f32 \{%0, %1\}, \[%2\];\" : \"=f\"\(aw_k0\), \"=f\"\(aw_k1\) : \"r\"\(aw_mks \+ 32u \* j\)\);\n"
    r"#pragma unroll\nfor \(int h = 0; h < 2; h\+\+\) \{\n"
    r"(?P<fma>aw_sc\[4 \* j \+ 2 \* h\] = fmaf\(aw_sc\[4 \* j \+ 2 \* h\], (?P<scale>[^,]+), aw_k0\);\n"
    r"aw_sc\[4 \* j \+ 2 \* h \+ 1\] = fmaf\(aw_sc\[4 \* j \+ 2 \* h \+ 1\], [^,]+, aw_k1\);\n)"
    r"\}\n\}\n\}\n")
out, pos, n_done = [], 0, 0
for m in block.finditer(src) if hoist else ():
    # The wait this tile's softmax follows: the last wgmma wait before the block.
    wait = src.rfind("wg_wait_group<", pos, m.start())
    if wait < 0:
        sys.exit("hoist_mask.py: no wgmma wait before a mask block")
    n = int(m.group("n"))
    loads = ("float aw_kp[%d];\n{\nconst hd_u32 aw_mks = %s;\n#pragma unroll\nfor (int j = 0; j < %d; j++)\n"
             "asm volatile(\"ld.shared.v2.f32 {%%0, %%1}, [%%2];\" : \"=f\"(aw_kp[2 * j]), \"=f\"(aw_kp[2 * j + 1]) : "
             "\"r\"(aw_mks + 32u * j));\n}\n") % (2 * n, m.group("addr"), n)
    fmas = ("#pragma unroll\nfor (int j = 0; j < %d; j++)\n#pragma unroll\nfor (int h = 0; h < 2; h++) {\n"
            "aw_sc[4 * j + 2 * h] = fmaf(aw_sc[4 * j + 2 * h], %s, aw_kp[2 * j]);\n"
            "aw_sc[4 * j + 2 * h + 1] = fmaf(aw_sc[4 * j + 2 * h + 1], %s, aw_kp[2 * j + 1]);\n}\n") % (
                n, m.group("scale"), m.group("scale"))
    out += [src[pos:wait], loads, src[wait:m.start()], fmas]
    pos = m.end()
    n_done += 1
out.append(src[pos:])
if hoist and n_done == 0:
    sys.exit("hoist_mask.py: no staged mask block in " + sys.argv[1])
open(sys.argv[2], "w").write("".join(out))
print("hoist_mask.py: %d mask blocks hoisted%s" % (n_done, ", fences after the stage waits" if fence else ""))
