// autograd_demo: reverse-mode autograd in two acts.
//
// Act 1 builds micrograd's famous expression (github.com/karpathy/micrograd)
// from scalars, walks the graph backward, and prints the same numbers as
// micrograd's README: g = 24.7041, dg/da = 138.8338, dg/db = 645.5773.
// Then it draws that graph, as micrograd's draw_dot does, into
// autograd_graph.svg (laid out by ember) and autograd_graph.dot (for
// Graphviz), in the folder given as argument or else the current one.
// Act 2 fits a line y = w x + b to noisy points by gradient descent and
// prints the loss falling. docs/autograd.md explains every step.
//
//   build/examples/autograd_demo [output folder] [--threads N]
#include <cstdio>
#include <string>
#include <vector>

#include <ember.h>

#include "flags.h"

using namespace ember;

// Prints the graph behind `t`, one node per line, indented by depth.
static void print_graph(const std::shared_ptr<Node>& node, int depth, int max_depth) {
    if (!node || depth > max_depth) return;
    std::printf("%*s%s\n", 2 * depth, "", node->name().c_str());
    for (const auto& next : node->next_functions()) print_graph(next, depth + 1, max_depth);
}

const char* const kAbout = "Reverse-mode autograd in two acts: micrograd's expression and its graph,\n"
                           "drawn into FOLDER/autograd_graph.svg and .dot (default: the current\n"
                           "folder), then a line fitted by gradient descent (docs/autograd.md).\n";

int main(int argc, char** argv) {
    std::vector<std::string> folders;
    const int stop = flags::threads_and_help(argc, argv, "autograd_demo", kAbout, max_num_threads(), set_num_threads,
                                             &folders, "[FOLDER]");
    if (stop >= 0) return stop; // after --help, or a bad command line
    if (folders.size() > 1) {
        std::fprintf(stderr,
                     "autograd_demo: one output folder, please; got %zu\nrun autograd_demo --help for the options\n",
                     folders.size());
        return 2;
    }
    const std::string folder = folders.empty() ? "." : folders[0];
    std::printf("Act 1: micrograd's expression, differentiated by ember\n\n");
    Tensor a = tensor({-4.0}, kFloat64).requires_grad_();
    Tensor b = tensor({2.0}, kFloat64).requires_grad_();
    Tensor c = a + b;
    Tensor d = a * b + pow(b, 3);
    c = c + c + 1;
    c = c + 1 + c + (-a);
    d = d + d * 2 + relu(b + a);
    d = d + 3 * d + relu(b - a);
    Tensor e = c - d;
    Tensor f = pow(e, 2);
    Tensor g = f / 2.0;
    g = g + 10.0 / f;
    std::printf("g     = %.4f   (micrograd prints 24.7041)\n", g.item());
    // Like PyTorch, ember keeps the gradient of leaves only; ask for the
    // others we want to see in the picture.
    for (const Tensor& t : {c, d, e, f, g}) t.retain_grad();
    g.backward(ones_like(g));
    std::printf("dg/da = %.4f  (micrograd prints 138.8338)\n", a.grad().item());
    std::printf("dg/db = %.4f  (micrograd prints 645.5773)\n\n", b.grad().item());
    std::printf("The first levels of the graph behind g (each node is a backward function):\n");
    print_graph(g.grad_fn(), 0, 3);

    // The whole graph as a picture. Naming the tensors we still hold lets the
    // picture show their values and gradients; the temporaries (c + c, ...)
    // are gone, so their boxes show only the op and the shape.
    const NamedTensors names{{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"e", e}, {"f", f}, {"g", g}};
    for (const char* file : {"autograd_graph.dot", "autograd_graph.svg"}) {
        draw_graph(g, folder + "/" + file, names);
        std::printf("wrote %s/%s\n", folder.c_str(), file);
    }

    std::printf("\nAct 2: fit y = w x + b to 64 noisy points of y = 3x - 1\n\n");
    manual_seed(1337);
    Tensor x = randn({64, 1});
    Tensor y = x * 3 - 1 + randn({64, 1}) * 0.1;
    Tensor w = zeros({1}).requires_grad_();
    Tensor bias = zeros({1}).requires_grad_();
    const double lr = 0.1;
    for (int step = 0; step <= 100; ++step) {
        Tensor loss = mean(pow(x * w + bias - y, 2)); // mean squared error
        loss.backward();
        {
            NoGradGuard no_grad; // the update itself is not part of the model
            w.sub_(w.grad() * lr);
            bias.sub_(bias.grad() * lr);
        }
        w.zero_grad();
        bias.zero_grad();
        if (step % 20 == 0)
            std::printf("step %3d  loss %.6f  w %.4f  b %.4f\n", step, loss.item(), w.item(), bias.item());
    }
    std::printf("\nw and b approach 3 and -1: the gradients pointed the right way.\n");
    return 0;
}
