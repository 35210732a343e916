// libFuzzer harness for the safetensors reader (nn/safetensors.cpp and the
// header's JSON, nn/json.cpp) and for train_gpt's checkpoint reader on top of
// it (read_run, examples/train/run_state.cpp): any bytes, written to a file
// and loaded as `load_safetensors(path)` and `train_gpt --resume path` load
// it. A bad file must raise nn::SafetensorsError. Anything else is a bug the
// fuzzer reports: another exception (it escapes and aborts), a sanitizer
// report, a crash, a hang. A file that loads is read to its last byte, so
// AddressSanitizer sees any tensor that points outside its memory.
// How to run it: tests/libfuzzer/README.md. replay.cpp replays its corpus
// (corpus/safetensors/) as a test in every build.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <ember.h>

#include "../../examples/train/run_state.h"

using namespace ember;

namespace {

// One scratch file per process, removed at exit.
struct ScratchFile {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("ember_fuzz_safetensors_" + std::to_string(::getpid()) + ".safetensors"))
                           .string();
    ~ScratchFile() { std::filesystem::remove(path); }
};

// Every byte of every tensor, summed, so that each one is read.
uint64_t touch(const nn::StateDict& dict) {
    uint64_t sum = 0;
    for (const auto& [name, t] : dict) {
        const Tensor c = t.contiguous();
        const auto* bytes = static_cast<const unsigned char*>(c.storage()->data());
        const size_t n = static_cast<size_t>(c.numel()) * element_size(c.dtype());
        for (size_t i = 0; i < n; ++i) sum += bytes[i];
        sum += name.size();
    }
    return sum;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static ScratchFile file;
    {
        std::ofstream out(file.path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) std::abort(); // the scratch file must be writable, or nothing is tested
    }
    try {
        nn::Metadata metadata;
        nn::StateDict dict = nn::load_safetensors(file.path, &metadata);
        volatile uint64_t sum = touch(dict);
        (void)sum;
    } catch (const nn::SafetensorsError&) {
        // a bad file, said so: what the reader must do
    }
    try {
        train::RunState run = train::read_run(file.path);
        volatile size_t n = run.step_losses.size() + run.evals.size() + run.vocab.chars().size();
        (void)n;
    } catch (const nn::SafetensorsError&) {
        // not a usable train_gpt checkpoint, said so
    }
    return 0;
}
