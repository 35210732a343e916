"""The fuzz program format, its input values, and its PyTorch interpreter.

A program is a few lines of text, one op per line, that both sides run:
PyTorch here (float64), ember in tests/fuzz/interpreter.cpp. The format:

    program <name>
    t0 = input [2,1,3] 1234 -2.0 2.0 grad     # leaf: shape, seed, range, grad|nograd
    t1 = mask [3] 99 0.4 -                    # bool leaf: shape, seed, P(true), keep-dim or -
    t2 = transpose t0 0 2                     # every other op: name, then arguments
    ...
    check t2                                  # compare this tensor's values
    end

Leaf values come from splitmix64 (below), never from a library's random
numbers, so both sides build them exactly: value i of `input S seed lo hi`
is lo + (hi - lo) * u(seed, i), in float64. tests/fuzz/README.md lists the
ops; ember's interpreter must accept exactly the same lines.
"""
import torch

MASK64 = (1 << 64) - 1


def uniform(seed, i):
    """The i-th splitmix64 draw from state `seed`, as a double in [0, 1)."""
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return (z >> 11) * (1.0 / (1 << 53))


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def input_values(shape, seed, lo, hi):
    return [lo + (hi - lo) * uniform(seed, i) for i in range(numel(shape))]


def mask_values(shape, seed, p, keep):
    """u < p, except that with keep = d, entries at index 0 along dim d are
    False (so a softmax over d never sees a row masked out entirely)."""
    n = numel(shape)
    out = [uniform(seed, i) < p for i in range(n)]
    if keep is not None:
        d = keep % len(shape)
        inner = numel(shape[d + 1 :])
        for i in range(n):
            if (i // inner) % shape[d] == 0:
                out[i] = False
    return out


def index_values(shape, seed, high):
    return [min(int(uniform(seed, i) * high), high - 1) for i in range(numel(shape))]


# ---- text -----------------------------------------------------------------


def fmt_list(xs):
    return "[" + ",".join(str(x) for x in xs) + "]"


def parse_list(s):
    if not (s.startswith("[") and s.endswith("]")):
        raise ValueError(f"expected a list like [2,3], got {s!r}")
    body = s[1:-1]
    return [int(x) for x in body.split(",")] if body else []


class Program:
    def __init__(self, name, lines=None, checks=None):
        self.name = name
        self.lines = lines or []  # (out, op, args)
        self.checks = checks or []

    def text(self):
        out = [f"program {self.name}"]
        out += [f"{o} = {op} {' '.join(str(a) for a in args)}".rstrip() for o, op, args in self.lines]
        out += [f"check {c}" for c in self.checks]
        out.append("end")
        return "\n".join(out) + "\n"

    def grad_leaves(self):
        return [o for o, op, args in self.lines if op == "input" and args[-1] == "grad"]


def read_programs(path):
    programs, current = [], None
    with open(path) as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if words[0] == "expect":
                continue
            if words[0] == "program":
                current = Program(words[1])
            elif words[0] == "check":
                current.checks.append(words[1])
            elif words[0] == "end":
                programs.append(current)
                current = None
            else:
                if words[1] != "=":
                    raise ValueError(f"bad line: {line!r}")
                current.lines.append((words[0], words[2], words[3:]))
    return programs


# ---- PyTorch's side -----------------------------------------------------------


def run_torch(program, dtype=torch.float64):
    """Runs a program; returns {name: tensor} for its checks, the gradient
    of every grad leaf as grad.<name>, and backpropagates from `loss`."""
    env = {}
    for out, op, args in program.lines:
        env[out] = _torch_op(op, args, env, dtype)
    results = {c: env[c].detach() for c in program.checks}
    loss = env["loss"]
    leaves = program.grad_leaves()
    loss.backward()
    for leaf in leaves:
        g = env[leaf].grad
        results["grad." + leaf] = torch.zeros_like(env[leaf]) if g is None else g
    return results


def _f(s):
    return float(s)


def _torch_op(op, a, env, dtype):
    T = lambda s: env[s]  # noqa: E731
    if op == "input":
        shape = parse_list(a[0])
        values = input_values(shape, int(a[1]), _f(a[2]), _f(a[3]))
        t = torch.tensor(values, dtype=torch.float64).reshape(shape).to(dtype)
        return t.requires_grad_(a[4] == "grad")
    if op == "mask":
        shape = parse_list(a[0])
        keep = None if a[3] == "-" else int(a[3])
        return torch.tensor(mask_values(shape, int(a[1]), _f(a[2]), keep), dtype=torch.bool).reshape(shape)
    if op == "index":
        shape = parse_list(a[0])
        return torch.tensor(index_values(shape, int(a[1]), int(a[2])), dtype=torch.int64).reshape(shape)
    # views
    if op == "transpose":
        return T(a[0]).transpose(int(a[1]), int(a[2]))
    if op == "permute":
        return T(a[0]).permute(parse_list(a[1]))
    if op == "narrow":
        return T(a[0]).narrow(int(a[1]), int(a[2]), int(a[3]))
    if op == "select":
        return T(a[0]).select(int(a[1]), int(a[2]))
    if op == "slice":
        x, dim = T(a[0]), int(a[1]) % T(a[0]).dim()
        return x[(slice(None),) * dim + (slice(int(a[2]), int(a[3]), int(a[4])),)]
    if op == "expand":
        return T(a[0]).expand(parse_list(a[1]))
    if op == "reshape":
        return T(a[0]).reshape(parse_list(a[1]))
    if op == "unsqueeze":
        return T(a[0]).unsqueeze(int(a[1]))
    if op == "squeeze":
        return T(a[0]).squeeze(int(a[1]))
    if op == "flatten":
        return T(a[0]).flatten(int(a[1]), int(a[2]))
    if op == "contiguous":
        return T(a[0]).contiguous()
    if op == "squeeze_all":
        return T(a[0]).squeeze()
    if op == "getitem":
        return T(a[0])[_index_spec(a[1])]
    if op == "chunk":
        return T(a[0]).chunk(int(a[1]), int(a[2]))[int(a[3])]
    if op == "split":
        return T(a[0]).split(int(a[1]), int(a[2]))[int(a[3])]
    # elementwise
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
    if op in binary:
        return binary[op](T(a[0]), T(a[1]))
    if op == "add_scalar":
        return T(a[0]) + _f(a[1])
    if op == "mul_scalar":
        return T(a[0]) * _f(a[1])
    if op == "rsub_scalar":
        return _f(a[1]) - T(a[0])
    if op == "rdiv_scalar":
        return _f(a[1]) / T(a[0])
    if op == "pow":
        return T(a[0]).pow(_f(a[1]))
    unary = {
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
        "relu": torch.relu, "abs": torch.abs, "neg": torch.neg, "sin": torch.sin, "cos": torch.cos,
    }  # fmt: skip
    if op in unary:
        return unary[op](T(a[0]))
    if op == "gelu":
        return torch.nn.functional.gelu(T(a[0]), approximate=a[1])
    # reductions: dims "[...]" (or "all"), keepdim 0/1
    if op in ("sum", "mean"):
        fn = torch.sum if op == "sum" else torch.mean
        if a[1] == "all":
            return fn(T(a[0]))
        return fn(T(a[0]), parse_list(a[1]), keepdim=a[2] == "1")
    if op == "var":
        if a[1] == "all":
            return torch.var(T(a[0]), unbiased=a[2] == "1")
        return torch.var(T(a[0]), parse_list(a[1]), unbiased=a[2] == "1", keepdim=a[3] == "1")
    if op in ("max", "min"):
        fn = torch.max if op == "max" else torch.min
        if a[1] == "all":
            return fn(T(a[0]))
        return fn(T(a[0]), int(a[1]), keepdim=a[2] == "1").values
    if op == "softmax":
        return torch.softmax(T(a[0]), int(a[1]))
    if op == "log_softmax":
        return torch.log_softmax(T(a[0]), int(a[1]))
    if op == "layer_norm":
        w = None if a[2] == "-" else T(a[2])
        b = None if a[3] == "-" else T(a[3])
        return torch.nn.functional.layer_norm(T(a[0]), parse_list(a[1]), w, b, eps=_f(a[4]))
    if op == "matmul":
        return torch.matmul(T(a[0]), T(a[1]))
    if op == "cat":
        return torch.cat([T(s) for s in a[1:]], int(a[0]))
    if op == "stack":
        return torch.stack([T(s) for s in a[1:]], int(a[0]))
    if op == "masked_fill":
        return T(a[0]).masked_fill(T(a[1]), _f(a[2]))
    if op == "where":
        return torch.where(T(a[0]), T(a[1]), T(a[2]))
    if op == "where_scalar":
        return torch.where(T(a[0]), T(a[1]), torch.tensor(_f(a[2]), dtype=T(a[1]).dtype))
    if op == "not":
        return T(a[0]).logical_not()
    if op == "topk":
        return torch.topk(T(a[0]), int(a[1]), int(a[2]), largest=a[3] == "1").values
    if op == "repeat_interleave":
        return T(a[0]).repeat_interleave(int(a[1]), dim=None if a[2] == "-" else int(a[2]))
    if op == "embedding":
        return torch.nn.functional.embedding(T(a[0]), T(a[1]))
    if op == "outer":
        return torch.outer(T(a[0]), T(a[1]))
    if op == "linear":
        return torch.nn.functional.linear(T(a[0]), T(a[1]), None if a[2] == "-" else T(a[2]))
    if op == "cross_entropy":
        return torch.nn.functional.cross_entropy(T(a[0]), T(a[1]), ignore_index=int(a[2]))
    if op == "scaled_masked_softmax":
        # ember's fused op, against the lines it fuses
        x = T(a[0]) * _f(a[2])
        if a[1] != "-":
            x = x.masked_fill(T(a[1]), float("-inf"))
        return torch.softmax(x, -1)
    if op == "sdpa":
        # PyTorch 2's F.scaled_dot_product_attention (1.13 lacks it), as its docs define it
        q, k, v = T(a[0]), T(a[1]), T(a[2])
        scale = 1.0 / q.shape[-1] ** 0.5 if a[5] == "-" else _f(a[5])
        scores = q @ k.transpose(-2, -1) * scale
        if a[4] == "1":
            L, S = q.shape[-2], k.shape[-2]
            scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
        if a[3] != "-":
            m = T(a[3])
            scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m
        return torch.softmax(scores, -1) @ v
    if op == "index_select":
        return torch.index_select(T(a[0]), int(a[1]), T(a[2]))
    if op == "tril":
        return torch.tril(T(a[0]), int(a[1]))
    if op == "triu":
        return torch.triu(T(a[0]), int(a[1]))
    raise ValueError(f"unknown op {op!r}")


def _index_spec(spec):
    """[1,:,0:3:2] -> (1, slice(None), slice(0, 3, 2))."""
    out = []
    for e in spec[1:-1].split(","):
        if ":" not in e:
            out.append(int(e))
            continue
        parts = (e.split(":") + ["", ""])[:3]
        start, stop, step = (int(p) if p else None for p in parts)
        out.append(slice(start, stop, step))
    return tuple(out)


# ---- results ----------------------------------------------------------------

# Results larger than this many elements are stored as fingerprints.
FULL_LIMIT = 64
FP_SEEDS = (0xF1A9, 0xF1AA, 0xF1AB)


_weight_cache = {}


def _weights(seed, n):
    if len(_weight_cache.get(seed, ())) < n:
        _weight_cache[seed] = torch.tensor([2.0 * uniform(seed, i) - 1.0 for i in range(n)], dtype=torch.float64)
    return _weight_cache[seed][:n]


def _hex(v):
    h = float(v).hex()
    if "p" not in h:
        return h
    m, e = h.split("p")
    if "." in m:
        m = m.rstrip("0").rstrip(".")
    return f"{m}p{e}"


# ember float32's tolerance against PyTorch float64 (kFloat32Tolerance in interpreter.h).
F32_RTOL, F32_ATOL = 1e-3, 1e-4


def float32_slack(t64, t32):
    """How much to widen the float32 tolerance for this tensor: 4 times
    PyTorch float32's own error as a fraction of that tolerance, at least 1,
    at most 1000. Some values are ill-conditioned in float32 whoever
    computes them: a gradient that is exactly 0 in exact arithmetic, left
    over from cancelling terms of size 10^3, is 10^-4 off in any float32."""
    if t64.numel() == 0:
        return 1.0
    t64, t32 = t64.detach().double(), t32.detach().double()
    if not bool(torch.isfinite(t32).all()):
        return 1000.0
    scale = max(1.0, t64.abs().max().item())
    ratio = ((t32 - t64).abs() / (F32_ATOL * scale + F32_RTOL * t64.abs())).max().item()
    return float(min(1000.0, max(1.0, 4.0 * ratio)))


def result_line(program_name, key, t, slack=1.0, full_limit=FULL_LIMIT):
    """`expect <program> <key> full <shape> <slack> <values>` or, for a large
    tensor, `expect <program> <key> fp <shape> <slack> <maxabs> <p0> <s0>
    <p1> <s1> <p2> <s2>`. slack widens the float32 tolerance (float32_slack);
    p_j = sum_i t_i w_j(i) and s_j = sum_i |t_i w_j(i)|, with w_j(i) =
    2 u(FP_SEEDS[j], i) - 1, in float64. An ember result within the
    elementwise tolerance of t is always within the implied tolerance of
    every p_j (interpreter.cpp), so a fingerprint is never stricter."""
    t = t.detach().to(torch.float64).contiguous()
    flat = t.reshape(-1).tolist()
    shape = fmt_list(list(t.shape)) + " " + _hex(slack)
    if len(flat) <= full_limit:
        return f"expect {program_name} {key} full {shape} " + " ".join(_hex(v) for v in flat)
    parts = [_hex(t.abs().max().item())]
    for seed in FP_SEEDS:
        w = _weights(seed, len(flat))
        parts += [_hex((t.reshape(-1) * w).sum().item()), _hex((t.reshape(-1) * w).abs().sum().item())]
    return f"expect {program_name} {key} fp {shape} " + " ".join(parts)


def all_finite(results):
    return all(bool(torch.isfinite(t).all()) for t in results.values())
