// Checkpoints (nn/safetensors.h): files written by the PyTorch-side writer
// load into ember; ember writes the canonical layout byte for byte; round
// trips; every kind of corrupt file is refused and leaves the model as it was;
// a failed save leaves the previous file intact.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#ifndef _WIN32
#include <sys/stat.h> // mkfifo
#endif

#include "check.h"

using namespace ember;
using namespace ember::testing;

namespace {

const std::string kDir = EMBER_FIXTURE_DIR;

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
}

// A fresh scratch path per test.
std::string scratch(const std::string& name) { return "ember_test_" + name + ".safetensors"; }

nn::GPTConfig tiny() {
    return {.vocab_size = 20, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2, .dropout = 0.0};
}

} // namespace

TEST_CASE("a GPT written by PyTorch-side tooling loads into ember and computes the same logits", "[safetensors]") {
    manual_seed(999); // different weights than the file's
    nn::GPTLanguageModel model(tiny());
    nn::Metadata meta;
    nn::load(model, kDir + "/gpt_tiny.safetensors", &meta);
    CHECK(meta["format"] == "pt");
    model.eval();
    const Fixtures& f = fixtures("gpt");
    require_close(model.forward(f.tensor("safetensors.idx")), f.tensor("safetensors.logits"), {1e-5, 1e-5});
}

TEST_CASE("ember writes the canonical safetensors layout byte for byte", "[safetensors]") {
    const Fixtures& f = fixtures("gpt");
    nn::StateDict dict;
    for (const char* name : {"w", "b", "idx", "mask", "empty"})
        dict.insert(name, f.tensor(std::string("canonical.") + name));
    std::string path = scratch("canonical");
    nn::save_safetensors(dict, path, {{"vocab", "ab\n\"c\xc3\xa9"}, {"step", "7"}});
    CHECK(read_bytes(path) == read_bytes(kDir + "/canonical.safetensors"));
    nn::Metadata meta;
    nn::StateDict back = nn::load_safetensors(kDir + "/canonical.safetensors", &meta);
    CHECK(meta["vocab"] == "ab\n\"c\xc3\xa9");
    for (const auto& [name, t] : dict) require_equal(back.at(name), t, name);
    std::remove(path.c_str());
}

TEST_CASE("a model saved and loaded again is the same model", "[safetensors]") {
    manual_seed(1);
    nn::GPTLanguageModel a(tiny());
    std::string path = scratch("round_trip");
    nn::save(a, path, {{"note", "round trip"}});
    manual_seed(2);
    nn::GPTLanguageModel b(tiny());
    nn::load(b, path);
    for (const auto& [name, t] : a.state_dict()) require_equal(b.state_dict().at(name), t, name);
    std::remove(path.c_str());
    for (const auto& entry : std::filesystem::directory_iterator("."))
        CHECK(entry.path().filename().string().rfind(path + ".tmp", 0) != 0); // no temporary file left behind
}

TEST_CASE("corrupt or mismatched files are refused and the model is left untouched", "[safetensors][errors]") {
    manual_seed(3);
    nn::GPTLanguageModel model(tiny());
    nn::StateDict before = model.state_dict();
    std::vector<Tensor> copies;
    for (const auto& [name, t] : before) copies.push_back(t.clone());
    const std::string good = read_bytes(kDir + "/gpt_tiny.safetensors");
    uint64_t header_len = 0;
    std::memcpy(&header_len, good.data(), 8);
    std::string header = good.substr(8, header_len);
    auto with_header = [&](std::string h) {
        while ((8 + h.size()) % 8) h += ' ';
        uint64_t n = h.size();
        return std::string(reinterpret_cast<const char*>(&n), 8) + h + good.substr(8 + header_len);
    };
    auto replace = [](std::string s, const std::string& from, const std::string& to) {
        size_t at = s.find(from);
        REQUIRE(at != std::string::npos);
        return s.replace(at, from.size(), to);
    };
    const std::vector<std::pair<std::string, std::string>> files = {
        {"empty", ""},
        {"short", good.substr(0, 5)},
        {"truncated data", good.substr(0, good.size() - 100)},
        {"truncated header", good.substr(0, 8 + header_len / 2)},
        {"header length too large", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + good.substr(8)},
        {"not json", with_header("{\"a\": [1, 2}")},
        {"not an object", with_header("[1, 2, 3]")},
        {"unknown dtype", with_header(replace(header, "\"F32\"", "\"F8_E4M3\""))},
        {"wrong byte count for its dtype", with_header(replace(header, "\"F32\"", "\"F16\""))},
        {"wrong byte count", with_header(replace(header, "\"shape\":[20,16]", "\"shape\":[20,15]"))},
        {"trailing bytes", good + std::string(4, '\0')},
        {"duplicate key",
         with_header(replace(header, "{", "{\"ln_f.bias\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"))},
    };
    for (const auto& [what, bytes] : files) {
        DYNAMIC_SECTION(what) {
            std::string path = scratch("corrupt");
            write_bytes(path, bytes);
            CHECK_THROWS_AS(nn::load(model, path), nn::SafetensorsError);
            std::remove(path.c_str());
            size_t i = 0;
            for (const auto& [name, t] : model.state_dict()) require_equal(t, copies[i++], name + " is untouched");
        }
    }
    SECTION("a file of another model: missing and unexpected keys, mismatched shapes") {
        std::string path = scratch("other_model");
        nn::save(nn::Linear(16, 20), path);
        CHECK_THROWS_AS(nn::load(model, path), ValueError);
        CHECK_THROWS_WITH(nn::load(model, path), Catch::Contains("missing keys") && Catch::Contains("lm_head.weight") &&
                                                     Catch::Contains("unexpected keys"));
        nn::GPTLanguageModel wider({.vocab_size = 21, .block_size = 8, .n_embd = 16, .n_head = 2, .n_layer = 2});
        nn::save(wider, path);
        CHECK_THROWS_WITH(nn::load(model, path), Catch::Contains("size mismatch") && Catch::Contains("(21,16)"));
        std::remove(path.c_str());
        size_t i = 0;
        for (const auto& [name, t] : model.state_dict()) require_equal(t, copies[i++], name + " is untouched");
    }
    CHECK_THROWS_WITH(nn::load(model, "no/such/file.safetensors"), Catch::Contains("cannot open"));
}

TEST_CASE("a save that cannot complete leaves the previous file intact", "[safetensors][errors]") {
    std::string path = scratch("keep");
    nn::save(nn::Linear(2, 2), path);
    std::string before = read_bytes(path);
    // The temporary file cannot be created inside a path that is a file.
    CHECK_THROWS_AS(nn::save(nn::Linear(2, 2), path + "/inside"), nn::SafetensorsError);
    // A tensor name that cannot be written is refused before anything is.
    nn::StateDict reserved;
    reserved.insert("__metadata__", ones({1}));
    CHECK_THROWS_AS(nn::save_safetensors(reserved, path), nn::SafetensorsError);
    CHECK(read_bytes(path) == before);
    std::remove(path.c_str());
}

TEST_CASE("a save replaces the file already there, in a folder whose name has spaces", "[safetensors]") {
    // Windows's rename refuses to replace a file, so the save replaces it
    // another way there (core/tensor/platform.cpp); either way the second
    // save is what loads, whole, and no temporary file is left beside it.
    const std::filesystem::path dir = "ember test saves";
    std::filesystem::remove_all(dir);
    REQUIRE(std::filesystem::create_directory(dir));
    const std::string path = (dir / "my model.safetensors").string();
    nn::StateDict first;
    first.insert("w", full({3}, 1.0f));
    nn::save_safetensors(first, path, {{"step", "1"}});
    nn::StateDict second;
    second.insert("w", arange(5).to(kFloat32));
    second.insert("b", full({2}, -2.0f));
    nn::save_safetensors(second, path, {{"step", "2"}});
    nn::Metadata meta;
    const nn::StateDict back = nn::load_safetensors(path, &meta);
    CHECK(meta["step"] == "2");
    REQUIRE(back.size() == 2);
    require_equal(back.at("w"), second.at("w"), "w");
    require_equal(back.at("b"), second.at("b"), "b");
    // Bytes go out as they are: a "\n" in the metadata is not widened to "\r\n".
    nn::save_safetensors(second, path, {{"lines", "a\nb\n"}});
    CHECK(nn::load_safetensors(path, &meta).size() == 2);
    CHECK(meta["lines"] == "a\nb\n");
    CHECK(read_bytes(path).find('\r') == std::string::npos);
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        CHECK(entry.path().filename() == "my model.safetensors");
        ++files;
    }
    CHECK(files == 1);
    std::filesystem::remove_all(dir);
}

TEST_CASE("the header reader follows JSON strictly", "[safetensors][errors]") {
    auto file_with_header = [](const std::string& header) {
        std::string h = header;
        while ((8 + h.size()) % 8) h += ' ';
        uint64_t n = h.size();
        std::string path = scratch("json");
        write_bytes(path, std::string(reinterpret_cast<const char*>(&n), 8) + h);
        return path;
    };
    // A character beyond U+FFFF, as json.dumps writes it by default (a surrogate pair).
    nn::Metadata meta;
    nn::load_safetensors(file_with_header("{\"__metadata__\":{\"smile\":\"\\ud83d\\ude00\"}}"), &meta);
    CHECK(meta["smile"] == "\xf0\x9f\x98\x80");
    for (const char* bad :
         {"{\"a\":{\"dtype\":\"F32\",\"shape\":[001],\"data_offsets\":[0,4]}}",
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[1-2],\"data_offsets\":[0,4]}}",
          "{\"__metadata__\":{\"x\":\"\\ud83d\"}}",
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,99999999999999999,99999999999999999],\"data_offsets\":[0,0]}}"}) {
        INFO(bad);
        CHECK_THROWS_AS(nn::load_safetensors(file_with_header(bad)), nn::SafetensorsError);
    }
    std::remove(scratch("json").c_str());
    CHECK_THROWS_WITH(nn::load_safetensors("."), Catch::Contains("it is a directory"));
}

TEST_CASE("files that are not safetensors are refused at once, saying what they are", "[safetensors][errors]") {
    // A missing file was "not a regular file"; a FIFO or /dev/zero was read
    // until memory ran out; 8 GB of zeros was read whole before its header
    // length (0) was looked at.
    using Catch::Contains;
    CHECK_THROWS_WITH(nn::load_safetensors("/no/such/file.safetensors"),
                      Contains("/no/such/file.safetensors") && Contains("No such file or directory"));
#ifdef _WIN32
    // Windows has no FIFO in the file system; its null device is a character device.
    CHECK_THROWS_WITH(nn::load_safetensors("NUL"), Contains("NUL: not a regular file"));
#else
    CHECK_THROWS_WITH(nn::load_safetensors("/dev/zero"), Contains("/dev/zero: not a regular file"));
    const std::string fifo = scratch("fifo");
    std::remove(fifo.c_str());
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(nn::load_safetensors(fifo), Contains("not a regular file")); // no writer: would block for ever
    std::remove(fifo.c_str());
#endif
    // A sparse file of 8 GB of zeros: refused from its first 8 bytes.
    const std::string zeros_path = scratch("zeros");
    {
        std::ofstream out(zeros_path, std::ios::binary);
        out.seekp((int64_t{8} << 30) - 1);
        out.put('\0');
    }
    // (test_train_gpt_files.cpp reads it through train_gpt --resume under a
    // 2 GB address space, which reading it whole would exceed.)
    CHECK_THROWS_WITH(nn::load_safetensors(zeros_path), Contains("the header does not start with '{'"));
    // A header length past the file, or past the format's 100 MB limit.
    {
        std::ofstream out(zeros_path, std::ios::binary | std::ios::trunc);
        const uint64_t n = 200'000'000;
        out.write(reinterpret_cast<const char*>(&n), 8);
        out.seekp(300'000'000);
        out.put('\0');
    }
    CHECK_THROWS_WITH(nn::load_safetensors(zeros_path), Contains("more than the format's limit of 100 MB"));
    std::remove(zeros_path.c_str());
}

TEST_CASE("half-precision floats and narrow integers are read exactly, widened", "[safetensors]") {
    // A file written byte by byte: each dtype's values and what they are, from the formats' definitions.
    struct Case {
        std::string dtype;
        std::vector<uint8_t> bytes; // little-endian
        Tensor expected;
    };
    const std::vector<Case> cases = {
        // float16: 1, -2, 0.5, 65504 (the largest), 2^-24 (the smallest subnormal), inf, -0
        {"F16",
         {0x00, 0x3C, 0x00, 0xC0, 0x00, 0x38, 0xFF, 0x7B, 0x01, 0x00, 0x00, 0x7C, 0x00, 0x80},
         from_vector(std::vector<float>{1.f, -2.f, 0.5f, 65504.f, std::ldexp(1.f, -24), INFINITY, -0.f})},
        // bfloat16: the top half of a float32: 1, -2, 3.140625, 2^-133 (subnormal in float32 too)
        {"BF16",
         {0x80, 0x3F, 0x00, 0xC0, 0x49, 0x40, 0x01, 0x00},
         from_vector(std::vector<float>{1.f, -2.f, 3.140625f, std::ldexp(1.f, -133)})},
        {"U8", {0, 1, 255}, from_vector(std::vector<int64_t>{0, 1, 255})},
        {"I8", {0x80, 0xFF, 0x7F}, from_vector(std::vector<int64_t>{-128, -1, 127})},
        {"I16", {0x00, 0x80, 0xFF, 0x7F}, from_vector(std::vector<int64_t>{-32768, 32767})},
        {"U16", {0xFF, 0xFF}, from_vector(std::vector<int64_t>{65535})},
        {"I32", {0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00}, from_vector(std::vector<int64_t>{INT32_MIN, 1})},
        {"U32", {0xFF, 0xFF, 0xFF, 0xFF}, from_vector(std::vector<int64_t>{4294967295})},
    };
    for (const Case& c : cases) {
        INFO(c.dtype);
        const int64_t n = c.expected.numel();
        std::string header = "{\"t\":{\"dtype\":\"" + c.dtype + "\",\"shape\":[" + std::to_string(n) +
                             "],\"data_offsets\":[0," + std::to_string(c.bytes.size()) + "]}}";
        const uint64_t length = header.size();
        std::string bytes(reinterpret_cast<const char*>(&length), 8);
        bytes += header;
        bytes.append(c.bytes.begin(), c.bytes.end());
        const std::string path = scratch("widen");
        write_bytes(path, bytes);
        nn::StateDict dict = nn::load_safetensors(path);
        std::remove(path.c_str());
        const Tensor& t = dict.at("t");
        CHECK(t.dtype() == c.expected.dtype());
        REQUIRE(t.shape() == c.expected.shape());
        for (int64_t i = 0; i < n; ++i) {
            INFO("element " << i);
            const double got = t[i].item<double>(), want = c.expected[i].item<double>();
            CHECK(got == want);
            CHECK(std::signbit(got) == std::signbit(want));
        }
    }
}
