// ember's interpreter for fuzz programs (interpreter.h). Each op line maps to
// one call of ember's public API; tests/fuzz/program.py maps the same line
// to PyTorch, and the two must stay in step (tests/fuzz/README.md lists the ops).
#include "interpreter.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace ember::fuzz {

double uniform(uint64_t seed, uint64_t i) {
    // splitmix64's (i+1)-th output from state `seed`, top 53 bits as a double.
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

namespace {

// ---- reading ------------------------------------------------------------------

[[noreturn]] void bad(const std::string& what) { throw std::runtime_error("fuzz program: " + what); }

// "[2,1,3]" -> {2, 1, 3}; "[]" -> {}.
Shape parse_list(const std::string& s) {
    if (s.size() < 2 || s.front() != '[' || s.back() != ']') bad("expected a list like [2,3], got " + s);
    Shape out;
    std::stringstream in(s.substr(1, s.size() - 2));
    std::string part;
    while (std::getline(in, part, ',')) out.push_back(std::stoll(part));
    return out;
}

int64_t numel_of(const Shape& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

double number(const std::string& s) { return std::strtod(s.c_str(), nullptr); } // reads hex, inf, -inf
int64_t integer(const std::string& s) { return std::stoll(s); }

} // namespace

std::vector<Program> read_programs(const std::string& path) {
    std::ifstream file(path);
    if (!file) bad("cannot open " + path);
    std::vector<Program> programs;
    Program current;
    bool inside = false;
    std::string raw;
    while (std::getline(file, raw)) {
        std::string line = raw.substr(0, raw.find('#'));
        std::istringstream in(line);
        std::vector<std::string> words;
        for (std::string w; in >> w;) words.push_back(w);
        if (words.empty()) continue;
        if (words[0] == "program") {
            current = Program{};
            current.name = words.at(1);
            inside = true;
        } else if (words[0] == "end") {
            programs.push_back(current);
            inside = false;
        } else if (words[0] == "expect") {
            if (programs.empty() || words.size() < 6 || programs.back().name != words[1])
                bad("expect line outside its program: " + line);
            Expectation e;
            e.key = words[2];
            e.full = words[3] == "full";
            e.shape = parse_list(words[4]);
            e.float32_slack = number(words[5]);
            if (!(e.float32_slack >= 1)) bad("expect line with a float32 slack below 1: " + e.key);
            for (size_t i = 6; i < words.size(); ++i) e.values.push_back(number(words[i]));
            size_t want = e.full ? static_cast<size_t>(numel_of(e.shape)) : 7;
            if (e.values.size() != want) bad("expect line with the wrong number of values: " + e.key);
            programs.back().expected.push_back(e);
            continue;
        } else if (!inside) {
            bad("line outside a program: " + line);
        } else if (words[0] == "check") {
            current.checks.push_back(words.at(1));
        } else {
            if (words.size() < 3 || words[1] != "=") bad("expected `name = op args`: " + line);
            current.lines.push_back({words[0], words[2], {words.begin() + 3, words.end()}});
        }
        current.text += line + "\n";
        if (words[0] == "end") programs.back().text = current.text;
    }
    if (inside) bad("program " + current.name + " has no end");
    return programs;
}

// ---- running ------------------------------------------------------------------------

namespace {

using Env = std::map<std::string, Tensor>;

const Tensor& get(const Env& env, const std::string& name) {
    auto it = env.find(name);
    if (it == env.end()) bad("unknown tensor " + name);
    return it->second;
}

// A leaf: `input [shape] seed lo hi grad|nograd`, value i = lo + (hi - lo) * u(seed, i).
Tensor make_input(const std::vector<std::string>& a, DType dtype) {
    Shape shape = parse_list(a.at(0));
    uint64_t seed = std::stoull(a.at(1));
    double lo = number(a.at(2)), hi = number(a.at(3));
    std::vector<double> values(numel_of(shape));
    for (size_t i = 0; i < values.size(); ++i) values[i] = lo + (hi - lo) * uniform(seed, i);
    // from_vector's empty shape means 1-D, so a 0-d leaf is a reshape of one.
    Tensor t = from_vector(values, {static_cast<int64_t>(values.size())}, dtype).reshape(shape);
    if (a.at(4) == "grad") t.requires_grad_();
    return t;
}

// `mask [shape] seed p keep`: u < p, but never at index 0 of dim `keep`.
Tensor make_mask(const std::vector<std::string>& a) {
    Shape shape = parse_list(a.at(0));
    uint64_t seed = std::stoull(a.at(1));
    double p = number(a.at(2));
    int64_t n = numel_of(shape);
    std::vector<bool> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = uniform(seed, i) < p;
    if (a.at(3) != "-") {
        int64_t rank = static_cast<int64_t>(shape.size());
        int64_t d = ((integer(a[3]) % rank) + rank) % rank;
        int64_t inner = numel_of(Shape(shape.begin() + d + 1, shape.end()));
        for (int64_t i = 0; i < n; ++i)
            if ((i / inner) % shape[d] == 0) values[i] = false;
    }
    return from_vector(values, {n}).reshape(shape);
}

// `index [shape] seed high`: integers in [0, high).
Tensor make_index(const std::vector<std::string>& a) {
    Shape shape = parse_list(a.at(0));
    uint64_t seed = std::stoull(a.at(1));
    int64_t high = integer(a.at(2));
    std::vector<int64_t> values(numel_of(shape));
    for (size_t i = 0; i < values.size(); ++i)
        values[i] = std::min<int64_t>(static_cast<int64_t>(uniform(seed, i) * static_cast<double>(high)), high - 1);
    return from_vector(values, {static_cast<int64_t>(values.size())}).reshape(shape);
}

// One entry of a `getitem` spec: "2" selects, "1:5:2", ":", "::2", "-3:" slice.
TensorIndex index_entry(const std::string& s) {
    if (s.find(':') == std::string::npos) return integer(s);
    std::vector<std::string> parts;
    std::stringstream in(s);
    for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
    while (parts.size() < 3) parts.push_back("");
    auto bound = [](const std::string& p) -> std::optional<int64_t> {
        if (p.empty()) return None;
        return std::stoll(p);
    };
    return Slice(bound(parts[0]), bound(parts[1]), parts[2].empty() ? 1 : std::stoll(parts[2]));
}

// x[spec] for a spec like [1,:,0:3:2]: Tensor::index takes a braced list, so
// one call per length.
Tensor getitem(const Tensor& x, const std::string& spec) {
    if (spec.size() < 2 || spec.front() != '[' || spec.back() != ']') bad("expected an index like [1,:], got " + spec);
    std::vector<TensorIndex> e;
    std::stringstream in(spec.substr(1, spec.size() - 2));
    for (std::string part; std::getline(in, part, ',');) e.push_back(index_entry(part));
    switch (e.size()) {
    case 1: return x.index({e[0]});
    case 2: return x.index({e[0], e[1]});
    case 3: return x.index({e[0], e[1], e[2]});
    case 4: return x.index({e[0], e[1], e[2], e[3]});
    default: bad("getitem takes 1 to 4 entries, got " + spec);
    }
}

Tensor run_line(const Line& line, const Env& env, DType dtype) {
    const std::string& op = line.op;
    const auto& a = line.args;
    auto T = [&](size_t i) -> const Tensor& { return get(env, a.at(i)); };
    auto I = [&](size_t i) { return integer(a.at(i)); };
    auto F = [&](size_t i) { return number(a.at(i)); };
    auto B = [&](size_t i) { return a.at(i) == "1"; };

    // leaves
    if (op == "input") return make_input(a, dtype);
    if (op == "mask") return make_mask(a);
    if (op == "index") return make_index(a);
    // views
    if (op == "transpose") return T(0).transpose(I(1), I(2));
    if (op == "permute") return T(0).permute(parse_list(a.at(1)));
    if (op == "narrow") return T(0).narrow(I(1), I(2), I(3));
    if (op == "select") return T(0).select(I(1), I(2));
    if (op == "slice") return T(0).slice(I(1), I(2), I(3), I(4));
    if (op == "expand") return T(0).expand(parse_list(a.at(1)));
    if (op == "reshape") return T(0).reshape(parse_list(a.at(1)));
    if (op == "unsqueeze") return T(0).unsqueeze(I(1));
    if (op == "squeeze") return T(0).squeeze(I(1));
    if (op == "flatten") return T(0).flatten(I(1), I(2));
    if (op == "contiguous") return T(0).contiguous();
    if (op == "squeeze_all") return T(0).squeeze();
    if (op == "getitem") return getitem(T(0), a.at(1));
    if (op == "chunk") return T(0).chunk(I(1), I(2)).at(I(3));
    if (op == "split") return T(0).split(I(1), I(2)).at(I(3));
    // element-wise
    if (op == "add") return add(T(0), T(1));
    if (op == "sub") return sub(T(0), T(1));
    if (op == "mul") return mul(T(0), T(1));
    if (op == "div") return div(T(0), T(1));
    if (op == "add_scalar") return T(0) + F(1);
    if (op == "mul_scalar") return T(0) * F(1);
    if (op == "rsub_scalar") return F(1) - T(0);
    if (op == "rdiv_scalar") return F(1) / T(0);
    if (op == "pow") return pow(T(0), F(1));
    if (op == "exp") return exp(T(0));
    if (op == "log") return log(T(0));
    if (op == "sqrt") return sqrt(T(0));
    if (op == "tanh") return tanh(T(0));
    if (op == "sigmoid") return sigmoid(T(0));
    if (op == "relu") return relu(T(0));
    if (op == "abs") return abs(T(0));
    if (op == "neg") return neg(T(0));
    if (op == "sin") return sin(T(0));
    if (op == "cos") return cos(T(0));
    if (op == "gelu") return gelu(T(0), a.at(1));
    // reductions: `sum x [dims] keepdim`, `sum x all`, `var x [dims] unbiased keepdim`
    if (op == "sum") return a.at(1) == "all" ? sum(T(0)) : sum(T(0), parse_list(a[1]), B(2));
    if (op == "mean") return a.at(1) == "all" ? mean(T(0)) : mean(T(0), parse_list(a[1]), B(2));
    if (op == "var") return a.at(1) == "all" ? var(T(0), Shape{}, B(2)) : var(T(0), parse_list(a[1]), B(2), B(3));
    if (op == "max") return a.at(1) == "all" ? max(T(0)) : max(T(0), I(1), B(2)).values;
    if (op == "min") return a.at(1) == "all" ? min(T(0)) : min(T(0), I(1), B(2)).values;
    if (op == "softmax") return softmax(T(0), I(1));
    if (op == "log_softmax") return log_softmax(T(0), I(1));
    if (op == "layer_norm") {
        Tensor w = a.at(2) == "-" ? Tensor() : T(2);
        Tensor b = a.at(3) == "-" ? Tensor() : T(3);
        return layer_norm(T(0), parse_list(a.at(1)), w, b, F(4));
    }
    if (op == "matmul") return matmul(T(0), T(1));
    if (op == "cat" || op == "stack") {
        std::vector<Tensor> parts;
        for (size_t i = 1; i < a.size(); ++i) parts.push_back(T(i));
        return op == "cat" ? cat(parts, I(0)) : stack(parts, I(0));
    }
    if (op == "masked_fill") return masked_fill(T(0), T(1), F(2));
    if (op == "where") return where(T(0), T(1), T(2));
    if (op == "where_scalar") return where(T(0), T(1), F(2));
    if (op == "not") return eq(T(0), false);
    if (op == "topk") return topk(T(0), I(1), I(2), B(3)).values;
    if (op == "repeat_interleave")
        return a.at(2) == "-" ? repeat_interleave(T(0), I(1)) : repeat_interleave(T(0), I(1), I(2));
    if (op == "embedding") return embedding(T(0), T(1));
    if (op == "outer") return outer(T(0), T(1));
    if (op == "linear") return linear(T(0), T(1), a.at(2) == "-" ? Tensor() : T(2));
    if (op == "cross_entropy") return cross_entropy(T(0), T(1), I(2));
    // `scaled_masked_softmax x mask scale`, mask `-` for none
    if (op == "scaled_masked_softmax") return scaled_masked_softmax(T(0), a.at(1) == "-" ? Tensor() : T(1), F(2));
    // `sdpa q k v mask causal scale`: mask `-` for none, scale `-` for 1/sqrt(E)
    if (op == "sdpa") {
        std::optional<double> scale;
        if (a.at(5) != "-") scale = F(5);
        return scaled_dot_product_attention(T(0), T(1), T(2), a.at(3) == "-" ? Tensor() : T(3), 0.0, B(4), scale);
    }
    if (op == "index_select") return index_select(T(0), I(1), T(2));
    if (op == "tril") return tril(T(0), I(1));
    if (op == "triu") return triu(T(0), I(1));
    bad("unknown op " + op);
}

} // namespace

Results run(const Program& program, DType dtype) {
    Env env;
    std::vector<std::string> leaves;
    for (const Line& line : program.lines) {
        env[line.out] = run_line(line, env, dtype);
        if (line.op == "input" && line.args.at(4) == "grad") leaves.push_back(line.out);
    }
    Results results;
    for (const std::string& name : program.checks) results.emplace_back(name, get(env, name).detach().to(kFloat64));
    get(env, "loss").backward();
    for (const std::string& leaf : leaves) {
        const Tensor& t = get(env, leaf);
        Tensor g = t.grad().defined() ? t.grad() : zeros_like(t);
        results.emplace_back("grad." + leaf, g.to(kFloat64));
    }
    return results;
}

// ---- comparing -------------------------------------------------------------------

namespace {

std::string shape_text(const Shape& s) {
    std::ostringstream out;
    out << "(";
    for (size_t i = 0; i < s.size(); ++i) out << (i ? "," : "") << s[i];
    out << ")";
    return out.str();
}

std::vector<double> values_of(const Tensor& t) {
    Tensor c = t.contiguous();
    const double* p = c.data_ptr<double>();
    return std::vector<double>(p, p + c.numel());
}

// The seeds of the fingerprint weights w_j(i) = 2 u(seed_j, i) - 1 (program.py's FP_SEEDS).
constexpr uint64_t kFingerprintSeeds[3] = {0xF1A9, 0xF1AA, 0xF1AB};

// Compares one result with its expectation; appends problems, updates worst.
void compare_one(const Expectation& e, const Tensor& actual, Tolerance tol, std::vector<std::string>& problems,
                 double& worst) {
    if (tol.float32_slack) {
        tol.rtol *= e.float32_slack;
        tol.atol *= e.float32_slack;
    }
    auto fail = [&](const std::string& what) { problems.push_back(e.key + ": " + what); };
    if (actual.shape() != e.shape) {
        fail("shape " + shape_text(actual.shape()) + ", PyTorch has " + shape_text(e.shape));
        return;
    }
    std::vector<double> a = values_of(actual);
    for (size_t i = 0; i < a.size(); ++i)
        if (!std::isfinite(a[i])) {
            fail("element " + std::to_string(i) + " is " + std::to_string(a[i]) + ", PyTorch's is finite");
            return;
        }
    if (e.full) {
        double maxabs = 0;
        for (double v : e.values) maxabs = std::max(maxabs, std::abs(v));
        double scale = std::max(1.0, maxabs);
        for (size_t i = 0; i < a.size(); ++i) {
            double allowed = tol.atol * scale + tol.rtol * std::abs(e.values[i]);
            double ratio = std::abs(a[i] - e.values[i]) / allowed;
            worst = std::max(worst, ratio);
            if (ratio > 1) {
                std::ostringstream msg;
                msg.precision(17);
                msg << "element " << i << " is " << a[i] << ", PyTorch's " << e.values[i] << " (allowed difference "
                    << allowed << ")";
                fail(msg.str());
                return;
            }
        }
        return;
    }
    // A fingerprint: if every element were within atol*scale + rtol*|e_i|,
    // each projection would be within atol*scale*sum|w| + rtol*s_j.
    double scale = std::max(1.0, e.values[0]);
    for (int j = 0; j < 3; ++j) {
        double p = 0, wsum = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            double w = 2.0 * uniform(kFingerprintSeeds[j], i) - 1.0;
            p += a[i] * w;
            wsum += std::abs(w);
        }
        double expected = e.values[1 + 2 * j], s = e.values[2 + 2 * j];
        double allowed = tol.atol * scale * wsum + tol.rtol * s;
        double ratio = std::abs(p - expected) / allowed;
        worst = std::max(worst, ratio);
        if (ratio > 1) {
            std::ostringstream msg;
            msg.precision(17);
            msg << "fingerprint " << j << " is " << p << ", PyTorch's " << expected << " (allowed difference "
                << allowed << ")";
            fail(msg.str());
            return;
        }
    }
}

} // namespace

std::vector<std::string> compare(const Program& program, const Results& results, Tolerance tol, double* worst) {
    std::vector<std::string> problems;
    double w = 0;
    for (const Expectation& e : program.expected) {
        auto it = std::find_if(results.begin(), results.end(), [&](const auto& r) { return r.first == e.key; });
        if (it == results.end()) {
            problems.push_back(e.key + ": ember has no such result");
            continue;
        }
        compare_one(e, it->second, tol, problems, w);
    }
    if (program.expected.size() != results.size())
        problems.push_back("ember has " + std::to_string(results.size()) + " results, PyTorch " +
                           std::to_string(program.expected.size()));
    if (worst) *worst = w;
    return problems;
}

std::vector<std::string> compare_bits(const Results& a, const Results& b) {
    std::vector<std::string> problems;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        std::vector<double> x = values_of(a[i].second), y = values_of(b[i].second);
        bool same =
            x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
        if (!same) problems.push_back(a[i].first + ": the bits differ");
    }
    return problems;
}

Report check_program(const Program& program) {
    Report report;
    auto add = [&](const std::string& run, const std::vector<std::string>& problems) {
        for (const std::string& p : problems) report.problems.push_back(run + ": " + p);
    };
    int threads = get_num_threads();
    try {
        set_num_threads(2);
        add("float64", compare(program, run(program, kFloat64), kFloat64Tolerance, &report.worst64));
        Results two = run(program, kFloat32);
        set_num_threads(1);
        Results one = run(program, kFloat32);
        add("float32", compare(program, one, kFloat32Tolerance, &report.worst32));
        add("float32 at 1 and 2 threads", compare_bits(one, two));
    } catch (const std::exception& e) {
        report.problems.push_back(std::string("ember threw: ") + e.what());
    }
    set_num_threads(threads);
    return report;
}

} // namespace ember::fuzz
