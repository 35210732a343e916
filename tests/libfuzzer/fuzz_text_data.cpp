// libFuzzer harness for train_gpt's text data reader (examples/train/data.cpp):
// the first byte picks --block-size (1 to 16), the rest is the text, written
// to a file and taken through what `train_gpt --data FILE` does with it:
// read_text_file (which checks the text), the vocabulary, encoding, the
// 90/10 split and its length check, and a batch. A bad text must raise
// train::InputError. Anything else is a bug the fuzzer reports: another
// exception (it escapes and aborts), a sanitizer report, a crash, or a
// broken round trip (decoding the encoded text, or a batch's targets not
// being its inputs shifted by one), which aborts.
// How to run it: tests/libfuzzer/README.md. replay.cpp replays its corpus
// (corpus/text_data/) as a test in every build.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <ember.h>

#include "../../examples/train/data.h"

using namespace ember;

namespace {

// One scratch file per process, removed at exit.
struct ScratchFile {
    std::string path =
        (std::filesystem::temp_directory_path() / ("ember_fuzz_text_" + std::to_string(::getpid()) + ".txt")).string();
    ~ScratchFile() { std::filesystem::remove(path); }
};

void require(bool ok) {
    if (!ok) std::abort(); // libFuzzer reports the input that broke a round trip
}

// The int64 elements of `t`, in order.
std::vector<int64_t> values(const Tensor& t) {
    const Tensor c = t.contiguous();
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    static ScratchFile file;
    const int64_t block_size = 1 + data[0] % 16;
    const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    {
        std::ofstream out(file.path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!out) std::abort();
    }
    try {
        const std::string text = train::read_text_file(file.path);
        require(text == bytes);
        const train::Vocab vocab = train::Vocab::from_text(text);
        require(train::Vocab::from_chars(vocab.chars()).chars() == vocab.chars());
        const Tensor encoded = from_vector(vocab.encode(text));
        require(vocab.decode(encoded) == text);
        const train::Splits splits = train::split_90_10(encoded);
        require(splits.train.numel() + splits.val.numel() == encoded.numel());
        train::check_split_lengths(splits, block_size, "--data " + file.path);
        manual_seed(1337);
        auto [x, y] = train::get_batch(splits.train, 4, block_size); // (4,T) each
        require(x.size(0) == 4 && x.size(1) == block_size && y.size(1) == block_size);
        // y is x shifted by one character: the next character is the target.
        require(values(x.narrow(1, 1, block_size - 1)) == values(y.narrow(1, 0, block_size - 1)));
        require(vocab.decode(x).size() == static_cast<size_t>(4 * block_size));
    } catch (const train::InputError&) {
        // not text, or too short for --block-size, said so: what the reader must do
    }
    return 0;
}
