// libFuzzer harness for the tokenizers (nn/tokenizer.h, nn/gpt2_tokenizer.h):
// the first byte picks what the rest is.
//   even: a tokenizer's .model file, read by BasicTokenizer::load and
//         RegexTokenizer::load. A bad file must raise TokenizerError; a good
//         one must save and load back to the same merges and special tokens.
//   odd:  a text. Not UTF-8: split_gpt2 and GPT-2's encode must raise
//         ValueError. UTF-8: the pieces concatenate to the text and GPT-2's
//         ids decode to it. Any bytes: a BasicTokenizer's ids decode to them,
//         and decode's replacement of broken UTF-8 is valid UTF-8.
// Anything else (another exception, a sanitizer report, a crash, a broken
// round trip, which aborts) is a bug the fuzzer reports.
// How to run it: tests/libfuzzer/README.md. replay.cpp replays its corpus
// (corpus/tokenizer/) as a test in every build.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <ember.h>

using namespace ember;
using namespace ember::tokenizer;

namespace {

struct ScratchFiles {
    std::string prefix =
        (std::filesystem::temp_directory_path() / ("ember_fuzz_tokenizer_" + std::to_string(::getpid()))).string();
    ~ScratchFiles() {
        for (const char* end : {".model", ".vocab", "_back.model", "_back.vocab"})
            std::filesystem::remove(prefix + end);
    }
};

void require(bool ok) {
    if (!ok) std::abort(); // libFuzzer reports the input that broke a round trip
}

template <typename Tokenizer>
void check_model(const std::string& path, const std::string& back) {
    try {
        const Tokenizer t = Tokenizer::load(path);
        t.save(back);
        const Tokenizer again = Tokenizer::load(back + ".model");
        require(again.merges() == t.merges());
        if constexpr (std::is_same_v<Tokenizer, RegexTokenizer>) require(again.special_tokens() == t.special_tokens());
    } catch (const TokenizerError&) {
        // not a model file this tokenizer reads, said so
    }
}

const GPT2Tokenizer& gpt2() {
    static const GPT2Tokenizer t = GPT2Tokenizer::load(EMBER_DATA_DIR "/gpt2");
    return t;
}

const BasicTokenizer& basic() {
    static const BasicTokenizer t = [] {
        BasicTokenizer b;
        b.train("the cat sat on the mat; the hat\xc3\xa9\xe2\x82\xac was flat", 290);
        return b;
    }();
    return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    static ScratchFiles files;
    const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] % 2 == 0) {
        {
            std::ofstream out(files.prefix + ".model", std::ios::binary | std::ios::trunc);
            out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
            if (!out) std::abort();
        }
        check_model<BasicTokenizer>(files.prefix + ".model", files.prefix + "_back");
        check_model<RegexTokenizer>(files.prefix + ".model", files.prefix + "_back");
        return 0;
    }
    // Any bytes come back from a BasicTokenizer; decoding gives valid UTF-8.
    require(basic().decode_bytes(basic().encode(bytes)) == bytes);
    const std::string replaced = basic().decode(basic().encode(bytes));
    try {
        split_gpt2(replaced);
    } catch (const ValueError&) {
        std::abort(); // the replacement must be valid UTF-8
    }
    try {
        const std::vector<std::string> pieces = split_gpt2(bytes);
        std::string joined;
        for (const std::string& p : pieces) joined += p;
        require(joined == bytes);
        require(bytes == replaced); // valid UTF-8 is left as it is
    } catch (const ValueError&) {
        require(bytes != replaced); // invalid UTF-8: the replacement changed something
        return 0;
    }
    if (bytes.size() <= 4096) require(gpt2().decode(gpt2().encode(bytes)) == bytes);
    return 0;
}
