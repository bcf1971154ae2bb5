# An independent port of Ray Tune's ASHA stopping rule (ray/tune/schedulers/async_hyperband.py,
# _Bracket with np.nanpercentile, ASHAScheduler's metric_op and max_t stop) producing the
# decisions that tests/tst_asha.cpp expects:
#   python3 tests/asha/asha_reference.py   (numpy; Debian: python3-numpy)
import numpy as np, random, math, warnings
warnings.simplefilter('ignore')
class Bracket:
    def __init__(self, min_t, max_t, rf, s):
        self.rf = rf
        n = int(np.log(max_t / min_t) / np.log(rf) - s + 1)
        self.rungs = [(min_t * rf ** (k + s), {}) for k in reversed(range(n))]
    def cutoff(self, recorded):
        if not recorded: return None
        return np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100)
    def on_result(self, trial, t, rew):
        for milestone, recorded in self.rungs:
            if t < milestone or trial in recorded: continue
            c = self.cutoff(recorded)
            stop = c is not None and rew < c
            recorded[trial] = rew
            return stop, milestone, c
        return False, None, None

def run(mode, seed):
    rng = random.Random(seed)
    b = Bracket(1, 9, 3, 0)
    op = 1 if mode == 'max' else -1
    quality = [rng.uniform(0.3, 0.9) for _ in range(9)]
    pending = list(range(9)); active = []; epoch = {}; out = []
    while pending or active:
        while len(active) < 3 and pending:
            t = pending.pop(0); active.append(t); epoch[t] = 0
        t = active[rng.randrange(len(active))]
        epoch[t] += 1; e = epoch[t]
        acc = quality[t] * (1 - math.exp(-e / 2.0)) + rng.uniform(-0.02, 0.02)
        value = acc if mode == 'max' else 2.5 * (1 - acc)
        if t == 4 and e == 1: value = float('nan')
        value = round(value, 4)
        if e >= 9:
            stop, rung, c = True, None, None  # max_t: finished, not judged
            done = True
            b.on_result(t, e, op * value)  # on_trial_complete
        else:
            stop, rung, c = b.on_result(t, e, op * value); done = False
            if stop: b.on_result(t, e, op * value)  # on_trial_complete: a skipped milestone
        out.append((t, e, value, stop, done, rung, c))
        if stop: active.remove(t)
    return out

for mode, seed in (('max', 7), ('min', 11)):
    print(f"// mode {mode}, seed {seed}")
    for t, e, v, stop, done, rung, c in run(mode, seed):
        cs = 'kNone' if c is None else ('kNaN' if math.isnan(c) else repr(float(c)))
        vs = 'kNaN' if isinstance(v, float) and math.isnan(v) else repr(v)
        print(f"{{ {t}, {e}, {vs}, {'true' if stop else 'false'}, {'true' if done else 'false'}, {rung if rung else 0}, {cs} }},")
