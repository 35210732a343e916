// Reads the fixture files that tests/fixtures/make_fixtures.py writes from
// PyTorch (the format is described in tests/fixtures/fixture_writer.py).
#pragma once

#include <map>
#include <string>

#include <ember.h>

namespace ember::testing {

class Fixtures {
public:
    // Loads tests/fixtures/<family>.txt.
    explicit Fixtures(const std::string& family);

    bool has(const std::string& name) const { return tensors_.count(name) > 0 || texts_.count(name) > 0; }
    // A fresh copy each call, so tests may modify what they get.
    Tensor tensor(const std::string& name) const;
    const std::string& text(const std::string& name) const;

private:
    std::string family_;
    std::map<std::string, Tensor> tensors_;
    std::map<std::string, std::string> texts_;
};

} // namespace ember::testing
