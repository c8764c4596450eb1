"""Prepared in session 19 for the next session: which step of f32 BERT's plan (1 layer, fixed
sizes, a padded attention_mask) makes its output NaN under tune model, where tune none is right
(session 19, calls h-j).

    PYTHONPATH=clients/python python3 bisect_f32.py SOCK

The daemon's answers for tune model are patched: step i's kernel set is swapped for the one tune
none gave the same step (same request, same buffers; asked first, on a daemon with an empty
cache), one step at a time. A swap that makes the
output finite names the step whose tune-model kernel is wrong. Prints each step's op, both
schedules and the output's error against eager."""
import functools
import json
import sys
import warnings

import torch
import transformers

import hidetd
import hidetd.backend

sock = sys.argv[1]
swap = {"step": None, "log": [], "past": False}
orig_plan_json = hidetd.Client.plan_json


def schedule(ks):
    s = ks.get("schedule") or ks.get("dispatch", {}).get("generic", {}).get("schedule") or {}
    return "%s %s" % (s.get("template"), json.dumps(s.get("params"), sort_keys=True))


none_plans = {}


def patched(self, graph, **options):
    req = dict(graph) if "graph" in graph else {"graph": graph}
    req.update(options)
    if req.get("tune") != "model":
        return orig_plan_json(self, req)
    # The tune none plan first, once per request: asked after tune model, the daemon answers
    # tune none from the kernels tune model cached.
    key = json.dumps(dict(req, tune=None), sort_keys=True)
    if key not in none_plans:
        none_plans[key] = orig_plan_json(self, dict(req, tune="none"))
    plan = orig_plan_json(self, req)
    i = swap["step"]
    if i is None:
        return plan
    if i >= len(plan["steps"]):
        swap["past"] = True
        return plan
    other = none_plans[key]
    a, b = plan["steps"], other["steps"]
    if len(a) != len(b) or a[i]["request"] != b[i]["request"]:
        swap["log"].append("step %d: the tune none plan differs in its steps; not swapped" % i)
        return plan
    line = "step %d %s: model %s -> none %s" % (i, a[i]["request"]["op"], schedule(a[i]["kernel_set"]),
                                                schedule(b[i]["kernel_set"]))
    if line not in swap["log"]:
        swap["log"].append(line)
    a[i] = dict(a[i], kernel_set=b[i]["kernel_set"])
    return plan


hidetd.Client.plan_json = patched
warnings.simplefilter("ignore")
cfg = transformers.BertConfig(num_hidden_layers=1)
torch.manual_seed(0)
m = transformers.BertModel(cfg).eval().cuda()
ids = torch.randint(0, cfg.vocab_size, (4, 37), device="cuda")
mask = torch.ones(4, 37, dtype=torch.int64, device="cuda")
mask[1, 18:] = 0
with torch.no_grad():
    want = m(ids, attention_mask=mask).last_hidden_state


def run():
    torch._dynamo.reset()
    be = functools.partial(hidetd.backend.hidetd_backend,
                           options={"address": sock, "tune": "model", "cache_dir": "off"})
    c = torch.compile(m, backend=be)
    with torch.no_grad():
        got = c(ids, attention_mask=mask).last_hidden_state
    return float((got - want).abs().max() / want.abs().max()), bool(torch.isfinite(got).all())


err, finite = run()
print("no swap: error %.1e finite %s" % (err, finite), flush=True)
for i in range(64):
    swap["step"], swap["log"], swap["past"] = i, [], False
    try:
        err, finite = run()
    except Exception as e:  # noqa: BLE001 - past the last step, or a swap the plan cannot take
        print("step %d: %s: %s" % (i, type(e).__name__, str(e).splitlines()[0][:120]), flush=True)
        continue
    if swap["past"]:
        break
    print("%s | error %.1e finite %s" % ("; ".join(swap["log"]), err, finite), flush=True)
