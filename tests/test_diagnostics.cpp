// train_gpt --diagnostics (examples/train/diagnostics.h): its statistics
// against their definitions (torch.std's Bessel correction,
// torch.histogram's density), what it captures from a model against the
// same tensors taken by hand, and the files a run writes.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../examples/train/diagnostics.h"
#include "train_gpt_run.h"
#include "xml.h"

using namespace ember;
namespace fs = std::filesystem;
using train::describe;
using train::Diagnostics;
using train::update_to_data;

TEST_CASE("describe: mean, std with Bessel's correction, share <= 0, and a density histogram", "[diagnostics]") {
    train::Stats s = describe(tensor({1.0f, 2.0f, 3.0f, 4.0f}));
    CHECK(s.count == 4);
    CHECK(s.mean == Approx(2.5).epsilon(1e-15));
    CHECK(s.std == Approx(std::sqrt(5.0 / 3.0)).epsilon(1e-15)); // sum of squares 5, over n - 1 = 3
    CHECK(s.nonpositive == 0);
    CHECK(describe(tensor({-1.0f, 0.0f, 2.0f, 3.0f})).nonpositive == 0.5);

    // torch.histogram(torch.arange(10.), bins=10, density=True): one value a
    // bin of width 0.9, each 1 / (10 * 0.9); the largest value lands in the last bin.
    s = describe(arange(10).to(kFloat32), 10);
    REQUIRE(s.density.size() == 10);
    CHECK(s.lo == 0);
    CHECK(s.hi == 9);
    for (double d : s.density) CHECK(d == Approx(1 / 9.0).epsilon(1e-12));

    // Any values: the bars' areas add up to 1.
    manual_seed(3);
    s = describe(randn({1000}) * 3, 37);
    double area = 0;
    for (double d : s.density) area += d * (s.hi - s.lo) / 37;
    CHECK(area == Approx(1).epsilon(1e-12));

    // Equal values: one range of width 1 around them, all in its middle bin.
    s = describe(full({5}, 2.0), 3);
    CHECK(s.lo == 1.5);
    CHECK(s.hi == 2.5);
    CHECK(s.density[1] == Approx(3.0));
    CHECK(std::isnan(describe(tensor({1.0f})).std)); // torch.std of one value is nan
}

TEST_CASE("update_to_data is the change's std over the weight's", "[diagnostics]") {
    Tensor before = tensor({1.0, -1.0, 2.0, -2.0}, kFloat64);
    CHECK(update_to_data(before, before * 1.01) == Approx(0.01).epsilon(1e-12));
    CHECK(update_to_data(before, before + 5.0) == 0); // a shift changes every element alike: std 0
    CHECK_THROWS_AS(update_to_data(before, tensor({1.0})), std::invalid_argument);
}

TEST_CASE("Diagnostics reports the activations, gradients and updates a model had", "[diagnostics]") {
    manual_seed(4);
    nn::fast::GPTConfig c{.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2, .dropout = 0.0};
    c.activation = nn::fast::Activation::gelu;
    auto model = std::make_shared<nn::fast::GPT>(c);
    optim::AdamW opt(model->parameters(), {.lr = 1e-2});
    Diagnostics diagnostics(*model);

    // The same activations taken by hand: hooks of the test's own.
    std::vector<Tensor> mine;
    std::vector<nn::RemovableHandle> handles;
    for (const auto& [name, module] : model->named_modules())
        if (module->type_name() == "GELU")
            handles.push_back(module->register_forward_hook([&mine](nn::Module&, const Tensor&, const Tensor& out) {
                out.retain_grad();
                mine.push_back(out);
            }));
    REQUIRE(handles.size() == 2);

    std::vector<Tensor> weights;
    for (const auto& [name, p] : model->named_parameters())
        if (p.dim() == 2) weights.push_back(p);
    for (int64_t step = 0; step < 3; ++step) {
        mine.clear();
        if (step == 1) diagnostics.capture_next_forward();
        Tensor idx = randint(0, 20, {4, 8}), targets = randint(0, 20, {4, 8});
        opt.zero_grad();
        model->forward(idx, targets).loss.backward();
        diagnostics.after_backward(step);
        if (step == 1) {
            // What the histograms show: this step's tensors.
            REQUIRE(diagnostics.activations().size() == 2);
            REQUIRE(diagnostics.activation_grads().size() == 2);
            for (size_t k = 0; k < 2; ++k) {
                CHECK(diagnostics.activations()[k].name == "transformer.h." + std::to_string(k) + ".mlp.act");
                CHECK(diagnostics.activations()[k].stats.mean == describe(mine[k]).mean);
                CHECK(diagnostics.activations()[k].stats.std == describe(mine[k]).std);
                CHECK(diagnostics.activation_grads()[k].stats.std == describe(mine[k].grad()).std);
                CHECK(diagnostics.activation_grads()[k].stats.density == describe(mine[k].grad()).density);
            }
            REQUIRE(diagnostics.weight_grads().size() == weights.size());
            for (size_t j = 0; j < weights.size(); ++j)
                CHECK(diagnostics.weight_grads()[j].grad_to_data ==
                      Approx(describe(weights[j].grad()).std / describe(weights[j]).std).epsilon(1e-12));
        }
        std::vector<Tensor> before;
        for (const Tensor& w : weights) before.push_back(w.detach().clone());
        diagnostics.before_update();
        opt.step();
        diagnostics.after_update(step);
        for (size_t j = 0; j < weights.size(); ++j)
            CHECK(diagnostics.ratios().back()[j] == Approx(std::log10(update_to_data(before[j], weights[j]))));
    }
    CHECK(diagnostics.steps() == std::vector<int64_t>{0, 1, 2});
    CHECK(diagnostics.weight_names().size() == weights.size());
}

TEST_CASE("train_gpt --diagnostics writes four pictures and the numbers", "[diagnostics][train_gpt]") {
    const std::string dir = ember::testing::scratch_dir("diagnostics");
    const int steps = 12;
    ember::testing::CommandResult r =
        ember::testing::run("--preset macbook --n-layer 2 --max-iters " + std::to_string(steps) +
                            " --eval-interval 6 --eval-iters 2 --sample-tokens 0 --diagnostics --out " + dir);
    INFO(r.out);
    REQUIRE(r.status == 0);
    for (const char* name : {"activations", "gradients", "weights", "updates"}) {
        const std::string path = dir + "/diagnostics_" + name + ".svg";
        CHECK(r.out.find(path) != std::string::npos);
        std::ifstream in(path);
        std::stringstream svg;
        svg << in.rdbuf();
        INFO(path);
        CHECK(ember::testing::xml_problem(svg.str()).empty());
        CHECK(svg.str().find("transformer.h.1.") != std::string::npos);
    }
    std::ifstream csv(dir + "/diagnostics.csv");
    std::string line;
    std::getline(csv, line);
    CHECK(line == "kind,name,shape,step,mean,std,nonpositive,ratio");
    int activations = 0, grads = 0, weights = 0, updates = 0;
    while (std::getline(csv, line)) {
        INFO(line);
        const std::string kind = line.substr(0, line.find(','));
        if (kind == "activation") {
            ++activations;
            CHECK(line.find(",\"(12, 64, 512)\"," + std::to_string(steps - 1) + ",") != std::string::npos);
        }
        grads += kind == "activation_grad";
        weights += kind == "weight_grad";
        if (kind == "update") {
            ++updates;
            const double ratio = std::stod(line.substr(line.rfind(',') + 1));
            CHECK(ratio > 0);
            CHECK(ratio < 1);
        }
    }
    // Two layers: two GELUs; 2-d weights: wte, wpe and four a layer.
    CHECK(activations == 2);
    CHECK(grads == 2);
    CHECK(weights == 10);
    CHECK(updates == 10 * steps);

    // Watching changes nothing: the same run without it ends on the same line.
    const std::string plain = ember::testing::scratch_dir("diagnostics_off");
    ember::testing::CommandResult off =
        ember::testing::run("--preset macbook --n-layer 2 --max-iters " + std::to_string(steps) +
                            " --eval-interval 6 --eval-iters 2 --sample-tokens 0 --out " + plain);
    REQUIRE(off.status == 0);
    auto final_losses = [](const std::string& out) {
        const size_t at = out.rfind("final: ");
        return out.substr(at, out.find(" tokens_per_s", at) - at);
    };
    CHECK(final_losses(off.out) == final_losses(r.out));
    CHECK_FALSE(fs::exists(plain + "/diagnostics.csv"));
    fs::remove_all(dir);
    fs::remove_all(plain);
}
