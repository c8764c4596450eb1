import re, sys
src, dst, B = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = open(src).read()
pat = re.compile(r"for \(int kt = wg_k0; kt < wg_k1; kt\+\+\) \{\nwg_wait\(wg_bar0 \+ 8 \* \((\d+) \+ wg_s\), wg_ph \^ 1\);\n")
m = pat.search(s)
assert m, "no producer loop"
S = int(m.group(1))
rep = ("for (int kt = wg_k0; kt < wg_k1; kt++) {\n"
       "if (((kt - wg_k0) %% %d) == 0) { int s2 = wg_s, p2 = wg_ph;\n"
       "for (int i = 0; i < %d && kt + i < wg_k1; i++) { wg_wait(wg_bar0 + 8 * (%d + s2), p2 ^ 1); if (++s2 == %d) { s2 = 0; p2 ^= 1; } } }\n") % (B, B, S, S)
s = s[:m.start()] + rep + s[m.end():]
assert not pat.search(s)
open(dst, "w").write(s)
