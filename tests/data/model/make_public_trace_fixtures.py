#!/usr/bin/env python3
"""Writes the public-trace fixtures (tests/model/trace_formats_test.cpp): synthetic rows, seeded, in
the exact header and value formats the published files use -- the Azure LLM inference traces 2023
(AzureLLMInferenceTrace_code.csv / _conv.csv: "2023-11-16 18:17:03.9799600", 7-digit fraction, no
zone) and 2024 (_code_1week.csv / _conv_1week.csv: "2024-05-10 00:00:00.009930+00:00", and
"2024-05-12 00:00:00+00:00" with no fraction), and BurstGPT (BurstGPT_1.csv: integer seconds from
the trace's start, Model, Request/Response/Total tokens, Log Type; a failed request has Response
tokens 0). Lengths follow code (long prompts, short outputs) and conversation (longer outputs)."""
import datetime
import random

rnd = random.Random(21)


def azure(path, start, n, frac_digits, tz, conv, no_frac_every=0):
    t = start
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(n):
        t += datetime.timedelta(microseconds=int(rnd.expovariate(1 / 350000)))
        if frac_digits == 7:
            ts = t.strftime("%Y-%m-%d %H:%M:%S") + ".%07d" % (t.microsecond * 10 + rnd.randrange(10))
        elif no_frac_every and i % no_frac_every == no_frac_every - 1:
            t = t.replace(microsecond=0) + datetime.timedelta(seconds=1)
            ts = t.strftime("%Y-%m-%d %H:%M:%S")
        else:
            ts = t.strftime("%Y-%m-%d %H:%M:%S") + ".%06d" % t.microsecond
        ts += tz
        if conv:
            p, o = max(1, int(rnd.lognormvariate(6.5, 0.9))), max(1, int(rnd.lognormvariate(5.2, 0.6)))
        else:
            p, o = max(1, int(rnd.lognormvariate(7.3, 1.1))), max(1, int(rnd.lognormvariate(2.7, 0.7)))
        rows.append(f"{ts},{p},{o}")
    open(path, "w").write("\n".join(rows) + "\n")


azure("azure-code-2023.csv", datetime.datetime(2023, 11, 16, 18, 17, 3, 979960), 40, 7, "", False)
azure("azure-conv-2023.csv", datetime.datetime(2023, 11, 16, 18, 15, 46, 680590), 36, 7, "", True)
azure("azure-code-2024.csv", datetime.datetime(2024, 5, 10, 0, 0, 0, 9930), 40, 6, "+00:00", False, no_frac_every=9)
azure("azure-conv-2024.csv", datetime.datetime(2024, 5, 12, 0, 0, 0, 1163), 36, 6, "+00:00", True, no_frac_every=11)

rows = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
t = 5
for i in range(40):
    model = "GPT-4" if rnd.random() < 0.2 else "ChatGPT"
    log = "API log" if rnd.random() < 0.3 else "Conversation log"
    p = max(1, int(rnd.lognormvariate(6.0, 1.0)))
    o = 0 if i in (7, 23, 31) else max(1, int(rnd.lognormvariate(4.8, 0.9)))
    rows.append(f"{t},{model},{p},{o},{p + o},{log}")
    t += int(rnd.expovariate(1 / 12))
open("burstgpt.csv", "w").write("\n".join(rows) + "\n")
