"""Session 19, call g: whether PyTorch's CUDA SDPA forms take an additive bias and is_causal
together, as aten.causal_padding_masks leaves them (its _CAUSAL_AND_MASK_FORMS: a rewritten node
must stay runnable by PyTorch), and with the bias at the shapes the backend's passes give it:
[b, 1, 1, s] (padding_masks drops the expands), [b, 1, s, s] and [b, h, s, s] expanded. Each
against the math form with the causal and padding masks combined."""
import torch

aten = torch.ops.aten
torch.manual_seed(0)
b, h, s, d = 3, 4, 77, 64
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
keep = torch.ones(b, s, dtype=torch.bool, device="cuda")
keep[1, 50:] = False
bias = torch.where(keep, 0.0, -65504.0).to(torch.float16)[:, None, None, :]
causal = torch.ones(s, s, dtype=torch.bool, device="cuda").tril()
full = torch.where(causal[None, None] & keep[:, None, None, :], 0.0, float("-inf"))
want = aten._scaled_dot_product_attention_math(q.float(), k.float(), v.float(), full, scale=0.125)[0]
for name, call in (
        ("cudnn", lambda m: aten._scaled_dot_product_cudnn_attention(q, k, v, m, False, 0.0, True, False, scale=0.125)[0]),
        ("efficient", lambda m: aten._scaled_dot_product_efficient_attention(q, k, v, m, False, 0.0, True, scale=0.125)[0])):
    for shape in ((b, 1, 1, s), (b, 1, s, s), (b, h, s, s)):
        try:
            got = call(bias.expand(shape))
            err = float((got.float() - want).abs().max())
            print("%-9s bias %-16s causal: max err %.2e %s" % (name, shape, err, "ok" if err < 1e-2 else "WRONG"))
        except Exception as e:  # noqa: BLE001 - the form refusing the pair is the answer
            print("%-9s bias %-16s causal: refused: %s" % (name, shape, str(e).splitlines()[0][:150]))
