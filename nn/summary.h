// summary(model, input): a table of the modules a forward pass calls, with
// each one's dotted name, type, output shape and parameter count, in
// torchinfo's layout (`torchinfo.summary(model, input_data=x,
// row_settings=("var_names", "depth"))`), with the totals below.
//
// It works through forward hooks (nn/module.h): a pre-hook on every module
// opens its row when it is called, so rows come in call order with their
// depth; a hook fills in the output shape. docs/modules.md shows a GPT's
// summary; tests/test_summary.cpp checks one against arithmetic.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

// One module call.
struct SummaryRow {
    std::string name;        // dotted ("blocks.0.sa"); "" for the model itself
    std::string type;        // type_name(): "Linear", "Block", ...
    int64_t depth = 0;       // 0 for the model, 1 for its children, ...
    int64_t depth_index = 0; // the row's number among all rows of its depth, from 1 (torchinfo's "2-3")
    Shape output_shape;      // of this call's output
    int64_t num_params = 0;  // parameters of this module and below
    int64_t own_params = 0;  // registered on this module itself (not its children)
    bool trainable = true;   // false when none of its parameters requires grad
    bool is_leaf = true;     // has no children
    bool recursive = false;  // called before in the same forward: its parameters are counted once
};

struct ModelSummary {
    std::vector<SummaryRow> rows; // in call order, every depth
    int64_t max_depth = 3;        // rows below this depth are counted but not printed
    int64_t total_params = 0;     // every parameter of the model, each once
    int64_t trainable_params = 0;
    int64_t mult_adds = 0; // of the Linear layers: rows x in_features x out_features each
    int64_t input_bytes = 0;
    int64_t forward_backward_bytes = 0; // outputs of the leaf layers with parameters, x2 for their gradients
    int64_t param_bytes = 0;
};

// Runs model(input) once, in eval mode and without a graph (every module's
// training flag is put back afterwards), with a hook on every module, and
// removes the hooks again, also when forward throws. The rows cover the
// modules called through operator() (ember's layers call their children
// that way); depth limits the printed rows, as torchinfo's depth=3.
ModelSummary summary(Module& model, const Tensor& input, int64_t depth = 3);

// torchinfo's table: "=" rules, the header, one row per module down to
// max_depth, the parameter totals, the multiply-adds and the sizes in MB.
std::ostream& operator<<(std::ostream& out, const ModelSummary& summary);
std::string to_string(const ModelSummary& summary);

} // namespace ember::nn
