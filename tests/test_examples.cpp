// The attention_* examples print what their notebooks' code prints in
// PyTorch (tests/fixtures/fx_examples.py holds the PyTorch twins; with the
// notebooks' seeds, that is the notebooks' numbers): the same text, and the
// same numbers to the last printed digit.
// autograd_demo prints micrograd's numbers and writes the graph picture
// docs/autograd.md shows. gpt_minimal prints what the lecture's gpt.py
// prints on tiny Shakespeare (losses and sample), learns, agrees with
// train_gpt, and refuses bad arguments.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "check.h"
#include "process.h"

using namespace ember::testing;

namespace {

// Compares two printouts: numbers must agree to within one unit of the last
// digit PyTorch printed (kernels may sum in another order and round the last
// printed digit the other way), everything else character for character.
// Returns the byte offset of the first difference, or npos.
size_t first_difference(const std::string& got, const std::string& expected) {
    auto number_at = [](const std::string& s, size_t i) {
        return std::isdigit(static_cast<unsigned char>(s[i])) ||
               (s[i] == '-' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])));
    };
    size_t i = 0, j = 0;
    while (i < got.size() && j < expected.size()) {
        if (number_at(got, i) && number_at(expected, j)) {
            char* end_g;
            char* end_e;
            double g = std::strtod(got.c_str() + i, &end_g);
            double e = std::strtod(expected.c_str() + j, &end_e);
            std::string text(expected.c_str() + j, static_cast<size_t>(end_e - (expected.c_str() + j)));
            // One unit of the last printed digit: 1e-4 for "0.1234", 1e-6 for "5.4878e-02".
            size_t dot = text.find('.'), exp = text.find_first_of("eE");
            size_t digits = dot == std::string::npos ? 0 : (exp == std::string::npos ? text.size() : exp) - dot - 1;
            double unit = std::pow(10.0, -static_cast<double>(digits));
            if (exp != std::string::npos) unit *= std::pow(10.0, std::stod(text.substr(exp + 1)));
            if (std::abs(g - e) > 1.01 * unit) return i;
            i = static_cast<size_t>(end_g - got.c_str());
            j = static_cast<size_t>(end_e - expected.c_str());
            continue;
        }
        if (got[i] != expected[j]) return i;
        ++i;
        ++j;
    }
    return i == got.size() && j == expected.size() ? std::string::npos : i;
}

// INFO and CHECK that `got` prints `expected`, by first_difference.
void check_prints(const std::string& got, const std::string& expected) {
    size_t at = first_difference(got, expected);
    if (at != std::string::npos) {
        size_t line_start = got.rfind('\n', at == 0 ? 0 : at - 1);
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        INFO("first difference at byte " << at << " of ember's output, in the line\n"
                                         << got.substr(line_start, got.find('\n', at) - line_start)
                                         << "\nPyTorch printed:\n"
                                         << expected);
        CHECK(at == std::string::npos);
    }
}

// The lines "step N: train loss X, val loss Y" of a printout, as (N, X, Y).
struct EvalLine {
    int64_t step;
    double train, val;
};
std::vector<EvalLine> eval_lines(const std::string& out) {
    std::vector<EvalLine> lines;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        long long step;
        double train, val;
        if (std::sscanf(line.c_str(), "step %lld: train loss %lf, val loss %lf", &step, &train, &val) == 3)
            lines.push_back({step, train, val});
    }
    return lines;
}

const std::string kShakespeare = std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt";
const std::string kGptMinimal = std::string(EMBER_EXAMPLES_DIR) + "/gpt_minimal";

} // namespace

TEST_CASE("the attention examples print their notebooks' numbers", "[examples]") {
    for (const char* name : {"attention_averaging", "attention_single_head", "attention_multihead", "attention_batched",
                             "attention_causal_dropout"}) {
        DYNAMIC_SECTION(name) {
            std::string got = run_command(std::string(EMBER_EXAMPLES_DIR) + "/" + name).out;
            check_prints(got, fixtures("examples").text(std::string("output.") + name));
        }
    }
}

TEST_CASE("gpt_minimal prints the losses and sample of the lecture's gpt.py, and learns", "[examples][gpt_minimal]") {
    // 100 steps of a 2-layer model with dropout 0.1 on tiny Shakespeare
    // (tests/fixtures/fx_examples.py's GPT_MINIMAL_ARGS): about a second.
    const Fixtures& f = fixtures("examples");
    const std::string args = f.text("args.gpt_minimal");
    CommandResult r = run_command(kGptMinimal + " " + kShakespeare + " " + args);
    REQUIRE(r.status == 0);
    // The same weights, batches and dropout masks as PyTorch's: the same
    // losses to the printed digit, and the same characters sampled.
    check_prints(r.out, f.text("output.gpt_minimal"));

    // It learns: every evaluation below the one before, from ln(65) = 4.17
    // (gpt.py's _init_weights start near uniform) to well under 3.
    std::vector<EvalLine> evals = eval_lines(r.out);
    REQUIRE(evals.size() == 5); // steps 0, 25, 50, 75 and the last, 99
    CHECK(evals.back().step == 99);
    CHECK(std::abs(evals[0].val - std::log(65.0)) < 0.05);
    for (size_t i = 1; i < evals.size(); ++i) {
        CHECK(evals[i].train < evals[i - 1].train);
        CHECK(evals[i].val < evals[i - 1].val);
    }
    CHECK(evals.back().val < 3.0);

    // The sample: the start token (a newline) and --max-new-tokens 80
    // characters, every one from tiny Shakespeare's vocabulary.
    std::ifstream in(kShakespeare, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string shakespeare = text.str();
    const std::set<char> vocab(shakespeare.begin(), shakespeare.end());
    REQUIRE(vocab.size() == 65);
    const size_t last_eval = r.out.rfind("step 99:");
    REQUIRE(last_eval != std::string::npos);
    std::string sample = r.out.substr(r.out.find('\n', last_eval) + 1); // after the last eval line
    REQUIRE(!sample.empty());
    sample.pop_back(); // the newline the program prints after it
    CHECK(sample.size() == 81);
    CHECK(sample[0] == '\n');
    for (char c : sample) CHECK(vocab.count(c) == 1);
}

TEST_CASE("gpt_minimal's losses are train_gpt's for the same model and seed", "[examples][gpt_minimal]") {
    // gpt_minimal builds gpt.py's GPTLanguageModel, as train_gpt's lecture
    // preset does with --model lecture, and draws its batches in the same
    // order, so their evaluations agree exactly until the last (gpt.py
    // evaluates before the last step, train_gpt after it). train_gpt's
    // default, the fast model, holds the same weights and draws the same
    // batches and dropout masks: it agrees to rounding, so to the printed
    // digit, give or take one in the last.
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("ember_gpt_minimal_" + std::to_string(getpid()))).string();
    CommandResult minimal = run_command(kGptMinimal + " " + kShakespeare +
                                        " --batch-size 4 --block-size 8 --n-embd 16 --n-head 2 --n-layer 1"
                                        " --dropout 0.1 --learning-rate 0.01 --max-iters 41 --eval-interval 20"
                                        " --eval-iters 3 --max-new-tokens 5");
    REQUIRE(minimal.status == 0);
    std::vector<EvalLine> a = eval_lines(minimal.out);
    REQUIRE(a.size() == 3); // steps 0, 20 and 40, the last
    CHECK(a[1].val < a[0].val);
    for (const std::string model : {"lecture", "fast"}) {
        INFO("train_gpt --model " << model);
        CommandResult trained = run_command(std::string(EMBER_EXAMPLES_DIR) + "/train_gpt --data " + kShakespeare +
                                            " --preset lecture --model " + model +
                                            " --batch-size 4 --block-size 8 --n-embd 16 --n-head 2"
                                            " --n-layer 1 --dropout 0.1 --lr 0.01 --max-iters 41 --eval-interval 20"
                                            " --eval-iters 3 --sample-tokens 5 --out " +
                                            dir + " 2>&1");
        std::filesystem::remove_all(dir);
        REQUIRE(trained.status == 0);
        std::vector<EvalLine> b = eval_lines(trained.out);
        REQUIRE(b.size() == 4); // steps 0, 20, 40 and 41, after the last
        const double margin = model == "lecture" ? 0.0 : 1e-4;
        for (size_t i = 0; i < 3; ++i) {
            CHECK(a[i].step == b[i].step);
            CHECK(a[i].train == Approx(b[i].train).margin(margin).epsilon(0));
            CHECK(a[i].val == Approx(b[i].val).margin(margin).epsilon(0));
        }
    }
}

TEST_CASE("gpt_minimal refuses bad arguments with a message and status 2", "[examples][gpt_minimal]") {
    struct Bad {
        std::string args, message;
    };
    for (const Bad& bad :
         {Bad{"--bogus 1", "unknown option --bogus"}, Bad{"--n-embd x", "--n-embd expects an integer, got \"x\""},
          Bad{"--learning-rate 1e-3x", "--learning-rate expects a finite number, got \"1e-3x\""},
          Bad{"--max-iters", "--max-iters needs a value"},
          Bad{"no/such/file.txt", "cannot read no/such/file.txt: No such file or directory"},
          Bad{"/dev/zero", "/dev/zero is not a regular file"}, // was read until memory ran out
          Bad{"--threads 0", "--threads must be between 1 and"},
          Bad{"--threads 100000", "--threads must be between 1 and " + std::to_string(ember::max_num_threads())},
          Bad{"--block-size 200000", "too short for --block-size 200000"},
          Bad{"--n-head 64 --n-embd 32", "n_embd=32 does not split into n_head=64 heads"}}) {
        DYNAMIC_SECTION(bad.args) {
            const bool names_a_file = bad.args.rfind("no/", 0) == 0 || bad.args.rfind("/dev/", 0) == 0;
            std::string data = names_a_file ? "" : kShakespeare + " ";
            CommandResult r = run_command(kGptMinimal + " --max-iters 1 " + data + bad.args + " 2>&1");
            INFO(r.out);
            CHECK(r.status == 2);
            CHECK(r.out.find(bad.message) != std::string::npos);
        }
    }
}

// autograd_demo draws micrograd's graph; docs/autograd.md shows the SVG it
// wrote, committed as docs/images/autograd_graph.svg. The two must stay the
// same: after a change to draw_graph, run the demo into docs/images/.
TEST_CASE("autograd_demo prints micrograd's numbers and the picture in the docs", "[examples]") {
    const auto dir = std::filesystem::temp_directory_path() / "ember_test_autograd_demo";
    std::filesystem::create_directories(dir);
    const CommandResult run = run_command(std::string(EMBER_EXAMPLES_DIR) + "/autograd_demo " + dir.string());
    CHECK(run.status == 0);
    // micrograd's README prints these three numbers for the same expression.
    for (const char* line : {"g     = 24.7041", "dg/da = 138.8338", "dg/db = 645.5773"}) {
        INFO(line);
        CHECK(run.out.find(line) != std::string::npos);
    }
    auto read = [](const std::filesystem::path& p) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    const std::string svg = read(dir / "autograd_graph.svg");
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(read(dir / "autograd_graph.dot").rfind("digraph autograd {", 0) == 0);
    INFO("docs/images/autograd_graph.svg is out of date: run autograd_demo docs/images");
    CHECK(svg == read(std::filesystem::path(EMBER_DOCS_DIR) / "images" / "autograd_graph.svg"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("the small examples take --threads and --help, and refuse what they do not know", "[examples]") {
    // Results never depend on the thread count, so --threads 1 and
    // --threads=2 print what the default prints, byte for byte.
    const auto dir = std::filesystem::temp_directory_path() / "ember_test_small_examples";
    std::filesystem::create_directories(dir);
    for (const std::string name :
         {"attention_averaging", "attention_single_head", "attention_multihead", "attention_batched",
          "attention_causal_dropout", "tensor_views", "custom_op", "custom_layer", "autograd_demo"}) {
        DYNAMIC_SECTION(name) {
            const std::string program = std::string(EMBER_EXAMPLES_DIR) + "/" + name;
            const std::string folder = name == "autograd_demo" ? " " + dir.string() : ""; // where it draws
            const CommandResult plain = run_command(program + folder);
            REQUIRE(plain.status == 0);
            for (const char* threads : {" --threads 1", " --threads=2"}) {
                const CommandResult r = run_command(program + threads + folder);
                INFO(threads);
                CHECK(r.status == 0);
                CHECK(r.out == plain.out);
            }
            const CommandResult help = run_command(program + " --help");
            CHECK(help.status == 0);
            CHECK(help.out.rfind("usage: " + name + " [", 0) == 0);
            CHECK(help.out.find("--threads N") != std::string::npos);
            struct Bad {
                std::string args, message;
            };
            for (const Bad& bad :
                 {Bad{"--bogus", "unknown option --bogus"}, Bad{"--threads 0", "--threads must be between 1 and"},
                  Bad{"--threads x", "--threads expects an integer, got \"x\""},
                  Bad{"--threads", "--threads needs a value"}}) {
                const CommandResult r = run_command(program + " " + bad.args + " 2>&1");
                INFO(bad.args << ": " << r.out);
                CHECK(r.status == 2);
                CHECK(r.out.rfind(name + ": " + bad.message, 0) == 0);
                CHECK(r.out.find("usage: " + name) != std::string::npos);
            }
        }
    }
    const CommandResult two = run_command(std::string(EMBER_EXAMPLES_DIR) + "/autograd_demo a b 2>&1");
    CHECK(two.status == 2);
    CHECK(two.out.find("autograd_demo: one output folder, please; got 2") != std::string::npos);
    const CommandResult explore = run_command(std::string(EMBER_EXAMPLES_DIR) + "/explore --threads 0 2>&1");
    CHECK(explore.status == 2);
    CHECK(explore.out.find("explore: --threads must be between 1 and") != std::string::npos);
    std::filesystem::remove_all(dir);
}
