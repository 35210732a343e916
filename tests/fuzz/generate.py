"""Random fuzz programs, deterministic by seed (no torch needed).

generate(seed) builds a program of 4 to 12 ops over random shapes (size-1
dims included): views, broadcasting binary ops, unary ops, reductions over
any dim with keepdim, softmax, log_softmax, layer_norm, matmul with batch
broadcasting, cat, stack, masked_fill, where, index_select, tril/triu.
generate(seed, "medium") uses sizes such as 7, 17, 33 and 65 that leave
remainders in ember's vectorised and blocked loops; generate(seed, "large")
shapes of 10^4 to 10^5 elements, so that ember's parallel loops engage (the
thread check in tests/fuzz/README.md).

The generator tracks each tensor's shape, a rough bound on |values| and,
for positive tensors, a lower bound: log, sqrt and division only get
operands bounded away from 0, exp only small ones, so every program is
finite and well conditioned. Every tensor no op consumed is checked and
folded into the scalar `loss` (sum of t * w, w a fixed random tensor),
whose backward gives the gradient of every leaf.
"""
import math
import random

from program import Program, fmt_list, index_values, numel


class Var:
    def __init__(self, name, shape, kind="float", bound=1.0, lo=None):
        self.name, self.shape, self.kind = name, tuple(shape), kind
        self.bound = bound  # rough max |value|
        self.lo = lo  # a lower bound when the values are all positive
        self.used = False
        self.internal = False  # holds -inf: only its softmax may read it
        self.requires_grad = False


class Retry(Exception):
    pass


# What each kind of program draws from: the sizes of a dim, the ranks of a
# fresh tensor, the most elements a tensor may have (and, large, the fewest
# for rank >= 2), how many ops, the sizes cat adds and index_select picks,
# and how often a fresh tensor has a size-0 dim.
KINDS = {
    "small": dict(prefix="p", sizes=[1, 1, 2, 2, 3, 3, 4, 5], ranks=[0, 1, 2, 2, 3, 3, 3, 4, 4], max_numel=256,
                  min_numel=0, ops=(4, 12), cat=[1, 2, 3], index=[1, 2, 3, 4, 5, 6], empty=0.03),
    "medium": dict(prefix="m", sizes=[1, 2, 7, 9, 16, 17, 31, 33, 65], ranks=[1, 2, 2, 3, 3], max_numel=4096,
                   min_numel=0, ops=(4, 10), cat=[1, 7, 16], index=[1, 9, 33], empty=0.0),
    "large": dict(prefix="large", sizes=[1, 3, 8, 17, 32, 64, 100, 128], ranks=[2, 3, 3, 4], max_numel=150_000,
                  min_numel=33_000, ops=(4, 7), cat=[1, 16], index=[1, 40], empty=0.0,
                  # the ops whose loops split between threads, more often
                  weights=dict(op_matmul=5, op_linear=3, op_sdpa=3, op_softmax=4, op_fused_softmax=3,
                               op_layer_norm=4, op_reduce=4, op_cross_entropy=1.5)),
}  # fmt: skip


class Generator:
    def __init__(self, seed, kind="small"):
        self.r = random.Random(seed)
        self.seed = seed
        self.cfg = KINDS[kind]
        self.large = kind == "large"
        self.max_numel = self.cfg["max_numel"]
        self.program = Program(f"{self.cfg['prefix']}.{seed}")
        self.vars = []
        self.leaf_count = 0

    # ---- helpers -------------------------------------------------------------
    def emit(self, op, args, shape, kind="float", bound=1.0, lo=None):
        if numel(shape) > self.max_numel:
            raise Retry()
        name = f"t{len(self.program.lines)}"
        self.program.lines.append((name, op, [str(a) for a in args]))
        v = Var(name, shape, kind, min(bound, 1e30), lo)
        by_name = {u.name: u for u in self.vars}
        v.requires_grad = args[-1] == "grad" if op == "input" else any(by_name[a].requires_grad for a in args if a in by_name)
        self.vars.append(v)
        return v

    def leaf_seed(self):
        self.leaf_count += 1
        return self.seed * 1000 + self.leaf_count

    def size(self):
        return self.r.choice(self.cfg["sizes"])

    def shape(self, rank=None):
        if rank is None:
            rank = self.r.choice(self.cfg["ranks"])
        for _ in range(20):
            s = tuple(self.size() for _ in range(rank))
            if s and self.r.random() < self.cfg["empty"]:
                # an empty tensor now and then: ops must handle size-0 dims
                s = tuple(0 if i == self.r.randrange(len(s)) else n for i, n in enumerate(s))
            if numel(s) <= self.max_numel and (numel(s) >= self.cfg["min_numel"] or rank < 2):
                return s
        return tuple(min(2, self.size()) for _ in range(rank))

    def input(self, shape, pos=False, grad=None):
        if grad is None:
            grad = self.r.random() < 0.85
        lo, hi = (0.5, 2.0) if pos else self.r.choice([(-1.0, 1.0), (-2.0, 2.0), (-3.0, 1.0)])
        args = [fmt_list(shape), self.leaf_seed(), lo, hi, "grad" if grad else "nograd"]
        v = self.emit("input", args, shape, bound=max(abs(lo), abs(hi)), lo=lo if pos else None)
        return v

    def mask(self, shape, keep=None):
        p = self.r.choice([0.2, 0.5, 0.8])
        return self.emit("mask", [fmt_list(shape), self.leaf_seed(), p, "-" if keep is None else keep], shape, "bool")

    def pick(self, cond=lambda v: True, bound=1e4):
        """A float tensor from the pool, favouring recent ones (deeper programs)."""
        cands = [v for v in self.vars if v.kind == "float" and not v.internal and v.bound <= bound and cond(v)]
        if not cands:
            raise Retry()
        weights = [1.0 + 3.0 * (i + 1) / len(cands) + (0 if v.used else 2.0) for i, v in enumerate(cands)]
        v = self.r.choices(cands, weights)[0]
        return v

    def use(self, *vs):
        for v in vs:
            v.used = True

    def dim(self, v):
        d = self.r.randrange(len(v.shape))
        return d - len(v.shape) if self.r.random() < 0.4 else d

    def partner_shape(self, s, into=False):
        """A shape that broadcasts with s (into=True: broadcasts *to* s)."""
        r = self.r
        rank = len(s)
        k = r.randint(0, rank) if into else r.randint(0, min(rank + 1, 4))
        out = []
        for i in range(k):
            j = rank - k + i  # aligned dim of s (negative: a new leading dim)
            if j < 0:
                out.append(self.size())
            elif s[j] == 1 and not into:
                out.append(r.choice([1, self.size()]))
            else:
                out.append(r.choice([s[j], s[j], 1]))
        return tuple(out)

    def other(self, shape, pos=False, into=False):
        """An operand for a binary op with a tensor of `shape`: an existing
        compatible tensor (maybe the same one) or a fresh leaf."""
        if self.r.random() < 0.4:
            cands = [
                v
                for v in self.vars
                if v.kind == "float"
                and not v.internal
                and v.bound < 1e3
                and (not pos or (v.lo is not None and v.lo >= 0.1))
                and broadcastable(v.shape, shape, into)
            ]
            if cands:
                return self.r.choice(cands)
        return self.input(self.partner_shape(shape, into), pos=pos)

    # ---- ops ---------------------------------------------------------------------
    def op_view(self):
        r = self.r
        x = self.pick()
        s = list(x.shape)
        kinds = ["unsqueeze", "reshape", "contiguous"]
        if len(s) >= 1:
            kinds += ["narrow", "select", "slice", "flatten"]
        if len(s) >= 2:
            kinds += ["transpose", "permute", "transpose"]
        if 1 in s or len(s) < 3:
            kinds += ["expand", "expand"]
        if 1 in s:
            kinds += ["squeeze"]
        kind = r.choice(kinds)
        b, lo = x.bound, x.lo
        if kind == "transpose":
            d0, d1 = self.dim(x), self.dim(x)
            out = list(s)
            out[d0], out[d1] = s[d1], s[d0]
            v = self.emit("transpose", [x.name, d0, d1], out, bound=b, lo=lo)
        elif kind == "permute":
            p = list(range(len(s)))
            r.shuffle(p)
            v = self.emit("permute", [x.name, fmt_list(p)], [s[i] for i in p], bound=b, lo=lo)
        elif kind == "narrow":
            d = self.dim(x)
            length = r.randint(1, s[d])
            start = r.randint(0, s[d] - length)
            if r.random() < 0.2:
                start -= s[d]  # counts from the end, as in PyTorch
            out = list(s)
            out[d] = length
            v = self.emit("narrow", [x.name, d, start, length], out, bound=b, lo=lo)
        elif kind == "select":
            d = self.dim(x)
            i = r.randrange(s[d])
            if r.random() < 0.3:
                i -= s[d]
            v = self.emit("select", [x.name, d, i], s[:d % len(s)] + s[d % len(s) + 1 :], bound=b, lo=lo)
        elif kind == "slice":
            d = self.dim(x)
            step = r.choice([1, 2, 3])
            start = r.randint(0, s[d] - 1)
            stop = r.randint(start + 1, s[d])
            out = list(s)
            out[d] = len(range(start, stop, step))
            v = self.emit("slice", [x.name, d, start, stop, step], out, bound=b, lo=lo)
        elif kind == "expand":
            new = [self.size() for _ in range(r.choice([0, 0, 1]))]
            full = new + [self.size() if n == 1 and r.random() < 0.7 else n for n in s]
            args = [-1 if i >= len(new) and n == s[i - len(new)] and r.random() < 0.3 else n for i, n in enumerate(full)]
            v = self.emit("expand", [x.name, fmt_list(args)], full, bound=b, lo=lo)
        elif kind == "reshape":
            out = factor(numel(s), r)
            args = list(out)
            if args and numel(s) > 0 and r.random() < 0.3:
                args[r.randrange(len(args))] = -1
            v = self.emit("reshape", [x.name, fmt_list(args)], out, bound=b, lo=lo)
        elif kind == "unsqueeze":
            d = r.randint(0, len(s))
            out = s[:d] + [1] + s[d:]
            v = self.emit("unsqueeze", [x.name, d], out, bound=b, lo=lo)
        elif kind == "squeeze":
            d = r.choice([i for i, n in enumerate(s) if n == 1])
            v = self.emit("squeeze", [x.name, d], s[:d] + s[d + 1 :], bound=b, lo=lo)
        elif kind == "flatten":
            a = r.randrange(len(s))
            e = r.randrange(a, len(s))
            out = s[:a] + [numel(s[a : e + 1])] + s[e + 1 :]
            v = self.emit("flatten", [x.name, a, e], out, bound=b, lo=lo)
        else:
            v = self.emit("contiguous", [x.name], s, bound=b, lo=lo)
        self.use(x)
        return v

    def op_binary(self):
        r = self.r
        op = r.choice(["add", "sub", "mul", "mul", "div"])
        x = self.pick(bound=1e3)
        y = self.other(x.shape, pos=op == "div")
        if r.random() < 0.5 and op != "div":
            x, y = y, x
        out = broadcast(x.shape, y.shape)
        if op in ("add", "sub"):
            lo = x.lo + y.lo if op == "add" and x.lo and y.lo else None
            v = self.emit(op, [x.name, y.name], out, bound=x.bound + y.bound, lo=lo)
        elif op == "mul":
            lo = x.lo * y.lo if x.lo and y.lo else None
            v = self.emit(op, [x.name, y.name], out, bound=x.bound * y.bound, lo=lo)
        else:
            lo = x.lo / y.bound if x.lo else None
            v = self.emit(op, [x.name, y.name], out, bound=x.bound / y.lo, lo=lo)
        self.use(x, y)
        return v

    def op_scalar(self):
        r = self.r
        x = self.pick(bound=1e3)
        c = r.choice([0.5, -1.5, 2.0, 3.0, -0.25])
        if r.random() < 0.2:
            try:
                x = self.pick(lambda v: v.lo is not None and v.lo >= 0.1)
            except Retry:
                x = self.input(self.shape(), pos=True)
        kinds = ["add_scalar", "mul_scalar", "rsub_scalar"]
        if x.lo is not None and x.lo >= 0.1:
            kinds.append("rdiv_scalar")
        kind = r.choice(kinds)
        if kind == "add_scalar":
            v = self.emit(kind, [x.name, c], x.shape, bound=x.bound + abs(c), lo=x.lo + c if x.lo and c > 0 else None)
        elif kind == "mul_scalar":
            v = self.emit(kind, [x.name, c], x.shape, bound=x.bound * abs(c), lo=x.lo * c if x.lo and c > 0 else None)
        elif kind == "rsub_scalar":
            v = self.emit(kind, [x.name, c], x.shape, bound=x.bound + abs(c))
        else:
            v = self.emit(kind, [x.name, c], x.shape, bound=abs(c) / x.lo, lo=c / x.bound if c > 0 else None)
        self.use(x)
        return v

    def op_unary(self):
        r = self.r
        x = self.pick(bound=1e3)
        if r.random() < 0.2:
            # log, sqrt, 1/x need an operand bounded away from 0
            try:
                x = self.pick(lambda v: v.lo is not None and v.lo >= 0.1)
            except Retry:
                x = self.input(self.shape(), pos=True)
        b = x.bound
        kinds = ["tanh", "sigmoid", "relu", "abs", "neg", "sin", "cos", "gelu"]
        if b <= 6:
            kinds += ["exp", "exp"]
        if b <= 20:
            kinds += ["pow2", "pow3"]
        if x.lo is not None and x.lo >= 0.1:
            kinds += ["log", "sqrt", "pow_half", "pow_neg1"]
        kind = r.choice(kinds)
        if kind == "exp":
            v = self.emit("exp", [x.name], x.shape, bound=math.exp(b), lo=math.exp(-b))
        elif kind == "tanh":
            v = self.emit("tanh", [x.name], x.shape, bound=1.0)
        elif kind == "sigmoid":
            v = self.emit("sigmoid", [x.name], x.shape, bound=1.0, lo=1 / (1 + math.exp(min(b, 50))))
        elif kind in ("relu", "abs"):
            v = self.emit(kind, [x.name], x.shape, bound=b, lo=x.lo)
        elif kind == "neg":
            v = self.emit(kind, [x.name], x.shape, bound=b)
        elif kind in ("sin", "cos"):
            v = self.emit(kind, [x.name], x.shape, bound=1.0)
        elif kind == "gelu":
            v = self.emit("gelu", [x.name, r.choice(["none", "tanh"])], x.shape, bound=b + 0.2)
        elif kind == "pow2":
            v = self.emit("pow", [x.name, 2.0], x.shape, bound=b * b, lo=x.lo * x.lo if x.lo else None)
        elif kind == "pow3":
            v = self.emit("pow", [x.name, 3.0], x.shape, bound=b**3, lo=x.lo**3 if x.lo else None)
        elif kind == "log":
            v = self.emit("log", [x.name], x.shape, bound=max(abs(math.log(x.lo)), math.log(b)))
        elif kind == "sqrt":
            v = self.emit("sqrt", [x.name], x.shape, bound=math.sqrt(b), lo=math.sqrt(x.lo))
        elif kind == "pow_half":
            v = self.emit("pow", [x.name, 0.5], x.shape, bound=math.sqrt(b), lo=math.sqrt(x.lo))
        else:
            v = self.emit("pow", [x.name, -1.0], x.shape, bound=1 / x.lo, lo=1 / b)
        self.use(x)
        return v

    def op_reduce(self):
        r = self.r
        x = self.pick(bound=1e3)
        s = list(x.shape)
        kind = r.choice(["sum", "sum", "mean", "var", "max", "min"])
        keep = r.choice([0, 1])
        if kind in ("sum", "mean", "var") and (not s or r.random() < 0.15):
            if numel(s) == 0 and kind != "sum":
                raise Retry()  # the mean of nothing is nan
            if kind == "var":
                unbiased = 1 if numel(s) > 1 else 0
                v = self.emit("var", [x.name, "all", unbiased], [], bound=x.bound**2 * 2)
            else:
                n = numel(s) if kind == "sum" else 1
                v = self.emit(kind, [x.name, "all"], [], bound=x.bound * n, lo=x.lo)
            self.use(x)
            return v
        if not s:
            raise Retry()
        if kind in ("max", "min"):
            d = self.dim(x)
            if s[d] == 0:
                raise Retry()  # PyTorch: max over an empty dim is an error
            out = list(s)
            if keep:
                out[d] = 1
            else:
                del out[d % len(s)]
            v = self.emit(kind, [x.name, d, keep], out, bound=x.bound, lo=x.lo)
        else:
            nd = r.choice([1, 1, 1, 2]) if len(s) >= 2 else 1
            dims = r.sample(range(len(s)), nd)
            if kind != "var" and r.random() < 0.05:
                dims = []  # every dim (PyTorch 1.13's var backward gets [] wrong: inf)
            dims = [d - len(s) if r.random() < 0.4 else d for d in dims]
            pos = sorted(d % len(s) for d in dims) or list(range(len(s)))
            n = numel([s[d] for d in pos])
            if n == 0 and kind != "sum" or numel(s) == 0 and kind == "var":
                raise Retry()
            out = [1 if i in pos else n_ for i, n_ in enumerate(s)] if keep else [n_ for i, n_ in enumerate(s) if i not in pos]
            if kind == "var":
                unbiased = 1 if n > 1 and r.random() < 0.7 else 0
                v = self.emit("var", [x.name, fmt_list(dims), unbiased, keep], out, bound=x.bound**2 * 2)
            else:
                bound = x.bound * (n if kind == "sum" else 1)
                lo = x.lo * (n if kind == "sum" else 1) if x.lo else None
                v = self.emit(kind, [x.name, fmt_list(dims), keep], out, bound=bound, lo=lo)
        self.use(x)
        return v

    def op_softmax(self):
        r = self.r
        kind = r.choice(["softmax", "log_softmax"])
        x = self.pick(bound=1e3)
        if not x.shape:
            v = self.emit(kind, [x.name, r.choice([0, -1])], (), bound=1.0)  # a 0-d softmax is 1 (log: 0)
            self.use(x)
            return v
        d = self.dim(x)
        if r.random() < 0.3:
            # attention's pattern: masked_fill(-inf) then softmax over the same dim;
            # the mask keeps index 0 of that dim, so no row is masked out entirely.
            rank = len(x.shape)
            nd = d % rank - rank  # the same dim, counted from the end
            k = r.randint(-nd, rank)
            shape = [n if r.random() < 0.6 else 1 for n in x.shape[rank - k :]]
            m = self.mask(shape, keep=nd)
            filled = self.emit("masked_fill", [x.name, m.name, "-inf"], x.shape, bound=x.bound)
            filled.internal = True
            self.use(x, m, filled)
            x, d, kind = filled, nd, "softmax"  # log_softmax would keep the -inf
        lo_bound = 2 * x.bound + math.log(max(2, x.shape[d]))
        if kind == "softmax":
            v = self.emit("softmax", [x.name, d], x.shape, bound=1.0)
        else:
            v = self.emit("log_softmax", [x.name, d], x.shape, bound=lo_bound)
        self.use(x)
        return v

    def op_layer_norm(self):
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1, bound=1e3)
        k = r.randint(1, min(3, len(x.shape)))
        ns = list(x.shape[len(x.shape) - k :])
        w = self.other_exact(ns) if r.random() < 0.6 else None
        b = self.other_exact(ns) if r.random() < 0.6 else None
        eps = r.choice([1e-5, 1e-5, 0.1])
        bound = math.sqrt(numel(ns)) * (w.bound if w else 1) + (b.bound if b else 0)
        args = [x.name, fmt_list(ns), w.name if w else "-", b.name if b else "-", eps]
        v = self.emit("layer_norm", args, x.shape, bound=bound)
        self.use(x, *[t for t in (w, b) if t])
        return v

    def op_matmul(self):
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1, bound=100)
        s = list(x.shape)
        k = s[-1]
        if len(s) == 1 or r.random() < 0.15:
            if len(s) == 1:
                # (k) @ (k) or (k) @ (..., k, m)
                bs = [k] if r.random() < 0.4 else list(self.partner_shape((), False)) + [k, self.size()]
            else:
                bs = [k]
        else:
            batch = self.partner_shape(tuple(s[:-2]))
            bs = list(batch) + [k, self.size()]
        y = self.other_exact(bs)
        out = matmul_shape(s, bs)
        v = self.emit("matmul", [x.name, y.name], out, bound=x.bound * y.bound * k)
        self.use(x, y)
        return v

    def other_exact(self, shape):
        """A tensor of exactly this shape: an existing one, a fresh leaf, or
        a transposed view of a fresh leaf (a non-contiguous operand)."""
        shape = tuple(shape)
        cands = [v for v in self.vars if v.kind == "float" and not v.internal and v.bound <= 100 and v.shape == shape]
        if cands and self.r.random() < 0.4:
            return self.r.choice(cands)
        if len(shape) >= 2 and self.r.random() < 0.3:
            swapped = shape[:-2] + (shape[-1], shape[-2])
            leaf = self.input(swapped)
            self.use(leaf)
            return self.emit("transpose", [leaf.name, -2, -1], shape, bound=leaf.bound)
        return self.input(shape)

    def op_cat(self):
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1, bound=1e3)
        s = list(x.shape)
        d = self.dim(x)
        if r.random() < 0.25:
            parts = [x] + [self.other_exact(s) for _ in range(r.randint(1, 2))]
            r.shuffle(parts)
            ds = r.randint(-len(s) - 1, len(s))
            out = list(s)
            out.insert(ds % (len(s) + 1), len(parts))
            v = self.emit("stack", [ds] + [p.name for p in parts], out, bound=max(p.bound for p in parts))
        else:
            parts = [x]
            for _ in range(r.randint(1, 2)):
                ps = list(s)
                ps[d] = r.choice(self.cfg["cat"])
                parts.append(x if r.random() < 0.2 else self.other_exact(ps))
            r.shuffle(parts)
            out = list(s)
            out[d] = sum(p.shape[d] for p in parts)
            v = self.emit("cat", [d] + [p.name for p in parts], out, bound=max(p.bound for p in parts))
        self.use(*parts)
        return v

    def op_mask(self):
        r = self.r
        x = self.pick(bound=1e3)
        if r.random() < 0.5:
            m = self.mask(self.partner_shape(x.shape, into=True))
            c = r.choice([0.0, -1.5, 2.5])
            v = self.emit("masked_fill", [x.name, m.name, c], x.shape, bound=max(x.bound, abs(c)))
            self.use(x, m)
        else:
            y = self.other(x.shape)
            cshape = self.partner_shape(broadcast(x.shape, y.shape))
            m = self.mask(cshape)
            a, b = (x, y) if r.random() < 0.5 else (y, x)
            out = broadcast(broadcast(a.shape, b.shape), cshape)
            v = self.emit("where", [m.name, a.name, b.name], out, bound=max(a.bound, b.bound))
            self.use(x, y, m)
        return v

    def op_index(self):
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1, bound=1e3)
        s = list(x.shape)
        if len(s) >= 2 and r.random() < 0.25:
            v = self.emit(r.choice(["tril", "triu"]), [x.name, r.choice([-1, 0, 0, 1])], s, bound=x.bound)
            self.use(x)
            return v
        d = self.dim(x)
        n = r.choice(self.cfg["index"])
        if s[d] == 0:
            raise Retry()
        idx = self.emit("index", [fmt_list([n]), self.leaf_seed(), s[d]], [n], "int")
        out = list(s)
        out[d] = n
        v = self.emit("index_select", [x.name, d, idx.name], out, bound=x.bound, lo=x.lo)
        self.use(x, idx)
        return v

    def op_getitem(self):
        """x[1, :, 0:3:2] and its kin: Tensor::index with ints and slices."""
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1)
        s = list(x.shape)
        n = r.randint(1, min(4, len(s)))
        entries, out = [], []
        for i in range(n):
            size = s[i]
            if size > 0 and r.random() < 0.3:
                entries.append(str(r.randint(-size, size - 1)))
                continue
            start = None if r.random() < 0.4 else r.randint(-size - 1, size + 1)
            stop = None if r.random() < 0.4 else r.randint(-size - 1, size + 1)
            step = r.choice([None, None, 1, 2, 3])
            text = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
            if step is not None:
                text += ":" + str(step)
            entries.append(text)
            out.append(len(range(*slice(start, stop, step).indices(size))))
        out += s[n:]
        v = self.emit("getitem", [x.name, "[" + ",".join(entries) + "]"], out, bound=x.bound, lo=x.lo)
        self.use(x)
        return v

    def op_split(self):
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1 and max(v.shape) > 0)
        s = list(x.shape)
        d = self.dim(x)
        if s[d] == 0:
            raise Retry()
        if r.random() < 0.5:
            n = r.randint(1, 4)
            size = -(-s[d] // n)  # chunk: pieces of ceil(s/n)
            op, arg = "chunk", n
        else:
            size = r.randint(1, s[d])
            op, arg = "split", size
        count = -(-s[d] // size)
        i = r.randrange(count)
        out = list(s)
        out[d] = min(size, s[d] - i * size)
        v = self.emit(op, [x.name, arg, d, i], out, bound=x.bound, lo=x.lo)
        self.use(x)
        return v

    def op_topk(self):
        """topk of a fresh leaf: PyTorch leaves the order of equal values
        unspecified (its CPU kernel ranks five equal values [2, 4, 3]; ember
        puts the lower index first), so topk only sees values without ties.
        Not in large programs: among 10^5 values rounded to float32, some tie."""
        r = self.r
        if self.large:
            raise Retry()
        x = self.input(self.shape())
        if not x.shape or min(x.shape) == 0:
            raise Retry()
        d = self.dim(x)
        s = list(x.shape)
        k = r.randint(1, s[d])
        out = list(s)
        out[d] = k
        v = self.emit("topk", [x.name, k, d, r.choice([0, 1])], out, bound=x.bound, lo=x.lo)
        self.use(x)
        return v

    def op_repeat(self):
        r = self.r
        x = self.pick()
        rep = r.randint(1, 3)
        if x.shape and r.random() < 0.7:
            d = self.dim(x)
            out = list(x.shape)
            out[d] *= rep
            v = self.emit("repeat_interleave", [x.name, rep, d], out, bound=x.bound, lo=x.lo)
        else:
            v = self.emit("repeat_interleave", [x.name, rep, "-"], [numel(x.shape) * rep], bound=x.bound, lo=x.lo)
        self.use(x)
        return v

    def op_embedding(self):
        r = self.r
        w = self.pick(lambda v: len(v.shape) == 2 and v.shape[0] > 0)
        ishape = tuple(self.size() for _ in range(r.choice([0, 1, 1, 2])))
        idx = self.emit("index", [fmt_list(ishape), self.leaf_seed(), w.shape[0]], ishape, "int")
        v = self.emit("embedding", [idx.name, w.name], ishape + (w.shape[1],), bound=w.bound, lo=w.lo)
        self.use(w, idx)
        return v

    def op_outer(self):
        a = self.pick(lambda v: len(v.shape) == 1, bound=100)
        b = self.other_exact((self.size(),))
        v = self.emit("outer", [a.name, b.name], (a.shape[0], b.shape[0]), bound=a.bound * b.bound)
        self.use(a, b)
        return v

    def op_linear(self):
        """F.linear: x (..., in) @ weight (out, in)^T + bias (out)."""
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1, bound=100)
        n_in, n_out = x.shape[-1], self.size()
        w = self.other_exact((n_out, n_in))
        b = self.other_exact((n_out,)) if r.random() < 0.6 else None
        bound = x.bound * w.bound * max(n_in, 1) + (b.bound if b else 0)
        v = self.emit("linear", [x.name, w.name, b.name if b else "-"], x.shape[:-1] + (n_out,), bound=bound)
        self.use(x, w, *([b] if b else []))
        return v

    def op_cross_entropy(self):
        r = self.r
        x = self.pick(lambda v: len(v.shape) in (1, 2) and v.shape[-1] > 0 and (len(v.shape) == 1 or v.shape[0] > 0))
        c = x.shape[-1]
        n = () if len(x.shape) == 1 else (x.shape[0],)
        # with N >= 3 rows, class c (one past the last) is ignore_index for some targets
        ignore = c if n and n[0] >= 3 and r.random() < 0.5 else -100
        seed = self.leaf_seed()
        if ignore == c and all(i == c for i in index_values(n, seed, c + 1)):
            raise Retry()  # every target ignored: the mean over none is nan
        t = self.emit("index", [fmt_list(n), seed, c + 1 if ignore == c else c], n, "int")
        v = self.emit("cross_entropy", [x.name, t.name, ignore], (), bound=2 * x.bound + math.log(c + 1))
        self.use(x, t)
        return v

    def attend_mask(self, shape):
        """A bool mask of `shape`, true where attention may look, true at index 0 of the last dim."""
        m = self.mask(shape, keep=-1)
        return self.emit("not", [m.name], shape, "bool")

    def op_fused_softmax(self):
        """ember's scaled_masked_softmax against the ops it fuses."""
        r = self.r
        x = self.pick(lambda v: len(v.shape) >= 1, bound=100)
        rank = len(x.shape)
        m = None
        if r.random() < 0.7:
            k = r.randint(1, rank)
            m = self.mask([n if r.random() < 0.6 else 1 for n in x.shape[rank - k :]], keep=-1)
        scale = r.choice([0.125, 0.5, 2.0])
        v = self.emit("scaled_masked_softmax", [x.name, m.name if m else "-", scale], x.shape, bound=1.0)
        self.use(x, *([m] if m else []))
        return v

    def op_sdpa(self):
        """scaled_dot_product_attention: q (..., L, E), k (..., S, E), v (..., S, Ev)."""
        r = self.r
        q = self.pick(lambda v: len(v.shape) >= 2, bound=10)
        qb, (L, E) = q.shape[:-2], q.shape[-2:]
        if E == 0:
            raise Retry()  # the default scale 1/sqrt(E)
        S, Ev = self.size(), self.size()
        kb = self.partner_shape(qb)
        vb = self.partner_shape(broadcast(qb, kb))
        k = self.other_exact(kb + (S, E))
        v_ = self.other_exact(vb + (S, Ev))
        batch = broadcast(broadcast(qb, kb), vb)
        kind = r.choice(["none", "bool", "bool", "float", "causal"])
        mask, causal = "-", 0
        if kind == "causal":
            causal = 1
        elif kind != "none":
            shape = self.partner_shape(batch + (L, S), into=True)
            if not shape:
                shape = (1,)
            if kind == "bool":
                mask = self.attend_mask(shape).name
            else:
                mask = self.input(shape, grad=False).name
        scale = "-" if r.random() < 0.6 else r.choice([0.25, 1.0])
        out = self.emit("sdpa", [q.name, k.name, v_.name, mask, causal, scale], batch + (L, Ev), bound=v_.bound)
        self.use(q, k, v_)
        return out

    OPS = [
        ("op_view", 5), ("op_binary", 5), ("op_scalar", 1), ("op_unary", 3), ("op_reduce", 3),
        ("op_softmax", 2), ("op_layer_norm", 1.5), ("op_matmul", 2), ("op_cat", 1.5), ("op_mask", 1.5),
        ("op_index", 1.5), ("op_getitem", 1.5), ("op_split", 1), ("op_topk", 1), ("op_repeat", 0.7),
        ("op_embedding", 0.7), ("op_outer", 0.5), ("op_linear", 1.5), ("op_cross_entropy", 0.7),
        ("op_fused_softmax", 1), ("op_sdpa", 1.5),
    ]  # fmt: skip

    def build(self):
        r = self.r
        n_ops = r.randint(*self.cfg["ops"])
        self.input(self.shape(), grad=True)
        if r.random() < 0.5:
            self.input(self.shape(), grad=True)
        done = 0
        attempts = 0
        while done < n_ops and attempts < 200:
            attempts += 1
            names, weights = zip(*self.OPS)
            extra = self.cfg.get("weights", {})
            weights = [extra.get(n, w) for n, w in zip(names, weights)]
            op = r.choices(names, weights)[0]
            mark = (len(self.program.lines), len(self.vars), self.leaf_count, [v.used for v in self.vars])
            try:
                getattr(self, op)()
                done += 1
            except (Retry, ValueError, IndexError):
                # (random's ValueError: a range that a size-0 dim made empty)
                # roll back anything emitted by the failed attempt
                del self.program.lines[mark[0] :]
                del self.vars[mark[1] :]
                self.leaf_count = mark[2]
                for v, u in zip(self.vars, mark[3]):
                    v.used = u
        # every float tensor nothing used is checked and folded into the loss
        sinks = [v for v in self.vars if v.kind == "float" and not v.used and v.name != "loss" and not is_leaf(self, v)]
        if not sinks:
            sinks = [self.vars[-1]]
        terms = []
        for v in sinks:
            self.program.checks.append(v.name)
            w = self.input(v.shape, grad=False)
            p = self.emit("mul", [v.name, w.name], v.shape)
            terms.append(self.emit("sum", [p.name, "all"], []))
        if not any(t.requires_grad for t in terms):
            terms.append(self.input((), grad=True))  # something for backward to reach
        acc = terms[0]
        for t in terms[1:]:
            acc = self.emit("add", [acc.name, t.name], [])
        self.program.lines.append(("loss", "add_scalar", [acc.name, "0.0"]))
        self.program.checks.append("loss")
        return self.program


def is_leaf(gen, v):
    for name, op, _ in gen.program.lines:
        if name == v.name:
            return op in ("input", "mask", "index")
    return False


def broadcastable(a, b, into=False):
    """True when a and b broadcast (into: a broadcasts to b's shape)."""
    if into and len(a) > len(b):
        return False
    for x, y in zip(reversed(a), reversed(b)):
        if into and x not in (1, y):
            return False
        if x != y and x != 1 and y != 1:
            return False
    return True


def broadcast(a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) if min(x, y) != 0 else 0 for x, y in zip(a, b))


def matmul_shape(a, b):
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 1:
        return tuple(b[:-2]) + (b[-1],)
    if len(b) == 1:
        return tuple(a[:-1])
    return broadcast(a[:-2], b[:-2]) + (a[-2], b[-1])


def factor(n, r):
    """A random shape with n elements, size-1 dims included."""
    if n == 0:
        out = [r.choice([1, 2, 3]) for _ in range(r.randint(0, 2))]
        out.insert(r.randint(0, len(out)), 0)
        return out
    out = []
    while n > 1 and len(out) < 3:
        divisors = [d for d in range(2, n + 1) if n % d == 0]
        d = r.choice(divisors)
        out.append(d)
        n //= d
    if n > 1:
        out.append(n)
    if r.random() < 0.3:
        out.insert(r.randint(0, len(out)), 1)
    return out


def generate(seed, kind="small"):
    return Generator(seed, kind).build()
