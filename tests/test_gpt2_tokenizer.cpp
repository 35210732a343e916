// GPT-2's tokenizer (nn/gpt2_tokenizer.h) against the reference encoder
// (gpt-3-encoder 1.1.4, OpenAI's encoder.py in JavaScript; pieces and ids
// made by tests/fixtures/make_gpt2_fixture.js): the split pattern's pieces
// and the ids of English, numbers, white space, accented Latin, Greek,
// Cyrillic, CJK, emoji with skin tones and joiners, Arabic and Hebrew;
// nanoGPT's tiny Shakespeare counts; round trips; SHA-256 against FIPS
// 180-4's examples; and every error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <ember.h>

#include "nn/json.h"

using namespace ember;
using namespace ember::tokenizer;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(EMBER_DATA_DIR) + "/gpt2";

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

const GPT2Tokenizer& gpt2() {
    static const GPT2Tokenizer t = GPT2Tokenizer::load(kData);
    return t;
}

struct Case {
    std::string text;
    std::vector<std::string> pieces;
    std::vector<int> ids;
};

std::vector<int> numbers(const std::string& text, char separator) {
    std::vector<int> out;
    std::stringstream s(text);
    std::string word;
    while (std::getline(s, word, separator))
        if (!word.empty()) out.push_back(std::stoi(word));
    return out;
}

// The fixture's cases, and its Shakespeare line's fields.
std::vector<Case> cases(std::vector<std::string>* shakespeare = nullptr) {
    std::ifstream in(std::string(EMBER_FIXTURE_DIR) + "/gpt2_tokenizer.txt");
    REQUIRE(in);
    std::vector<Case> out;
    std::string line;
    while (std::getline(in, line)) {
        const size_t space = line.find(' ');
        const std::string tag = line.substr(0, space), rest = space == std::string::npos ? "" : line.substr(space + 1);
        if (tag == "text") out.push_back({internal::parse_json(rest, "fixture").text, {}, {}});
        if (tag == "pieces")
            for (const auto& item : internal::parse_json(rest, "fixture").items) out.back().pieces.push_back(item.text);
        if (tag == "ids") out.back().ids = numbers(rest, ' ');
        if (tag == "shakespeare" && shakespeare) {
            std::stringstream fields(rest);
            std::string field;
            while (fields >> field) shakespeare->push_back(field);
        }
    }
    return out;
}

} // namespace

TEST_CASE("GPT-2's pieces and ids equal the reference encoder's", "[gpt2_tokenizer]") {
    const std::vector<Case> all = cases();
    REQUIRE(all.size() == 16);
    for (const Case& c : all) {
        INFO("text: " << c.text);
        CHECK(split_gpt2(c.text) == c.pieces);
        CHECK(gpt2().encode(c.text) == c.ids);
        CHECK(gpt2().decode(c.ids) == c.text);
    }
}

TEST_CASE("tiny Shakespeare: nanoGPT's 301,966 train and 36,059 val tokens", "[gpt2_tokenizer][data]") {
    std::vector<std::string> fields;
    cases(&fields);
    REQUIRE(fields.size() == 4);
    const std::string text = read(std::string(EMBER_DATA_DIR) + "/tinyshakespeare.txt");
    // nanoGPT's prepare.py for tiny Shakespeare: the first 90% of the characters
    // (bytes: the text is ASCII) train, the rest validate.
    const size_t cut = text.size() * 9 / 10;
    const std::vector<int> train = gpt2().encode(text.substr(0, cut)), val = gpt2().encode(text.substr(cut));
    CHECK(train.size() == 301966);
    CHECK(val.size() == 36059);
    CHECK(std::to_string(train.size()) == fields[0]);
    CHECK(std::to_string(val.size()) == fields[1]);
    CHECK(std::vector<int>(train.begin(), train.begin() + 16) == numbers(fields[2], ','));
    CHECK(std::vector<int>(val.begin(), val.begin() + 16) == numbers(fields[3], ','));
    CHECK(gpt2().decode(train) + gpt2().decode(val) == text);
}

TEST_CASE("GPT-2's vocabulary, <|endoftext|> and decoding broken UTF-8", "[gpt2_tokenizer]") {
    const GPT2Tokenizer& t = gpt2();
    CHECK(t.vocab_size() == 50257);
    CHECK(t.token_bytes(GPT2Tokenizer::kEndOfText) == "<|endoftext|>");
    CHECK(t.token_bytes(220) == " ");
    CHECK(t.token_bytes(198) == "\n");
    CHECK(t.token_bytes(262) == " the");
    // The text "<|endoftext|>" is text (ordinary encoding), not the special id.
    CHECK(t.encode("<|endoftext|>") == std::vector<int>{27, 91, 437, 1659, 5239, 91, 29});
    // "龘" is the bytes E9 BE 98, two tokens: E9 BE and 98. Decoded alone,
    // the first is a sequence cut short, one U+FFFD; the second a byte no
    // sequence starts with, another.
    const std::vector<int> dragon = t.encode("\xe9\xbe\x98");
    REQUIRE(dragon.size() == 2);
    CHECK(t.decode_bytes({dragon[0]}) == "\xe9\xbe");
    CHECK(t.decode({dragon[0]}) == "\xef\xbf\xbd");
    CHECK(t.decode({dragon[1], dragon[0]}) == "\xef\xbf\xbd\xef\xbf\xbd");
    CHECK(t.decode(dragon) == "\xe9\xbe\x98");
    // Any valid UTF-8 comes back.
    std::mt19937 rng(3);
    for (int round = 0; round < 100; ++round) {
        std::string text;
        for (int i = 0; i < 30; ++i) {
            uint32_t cp = std::uniform_int_distribution<uint32_t>(0, round % 2 ? 0x10FFFF : 0x7F)(rng);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = ' ';
            if (cp < 0x80) text += static_cast<char>(cp);
            else if (cp < 0x800)
                text += static_cast<char>(0xC0 | (cp >> 6)), text += static_cast<char>(0x80 | (cp & 0x3F));
            else if (cp < 0x10000)
                text += static_cast<char>(0xE0 | (cp >> 12)), text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                    text += static_cast<char>(0x80 | (cp & 0x3F));
            else
                text += static_cast<char>(0xF0 | (cp >> 18)), text += static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                    text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), text += static_cast<char>(0x80 | (cp & 0x3F));
        }
        std::string joined;
        for (const std::string& p : split_gpt2(text)) joined += p;
        REQUIRE(joined == text);
        REQUIRE(t.decode(t.encode(text)) == text);
    }
}

TEST_CASE("sha256_hex: FIPS 180-4's examples", "[gpt2_tokenizer]") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    CHECK(sha256_hex(read(kData + "/vocab.bpe")) == GPT2Tokenizer::kVocabSha256);
}

TEST_CASE("GPT-2's tokenizer: every error", "[gpt2_tokenizer][errors]") {
    const GPT2Tokenizer& t = gpt2();
    CHECK_THROWS_WITH(t.encode("ok \xff"), Catch::Contains("[split_gpt2]") &&
                                               Catch::Contains("not valid UTF-8 at byte 3") && Catch::Contains("0xff"));
    CHECK_THROWS_AS(split_gpt2("\xc0\xaf"), ValueError);     // an overlong '/'
    CHECK_THROWS_AS(split_gpt2("\xed\xa0\x80"), ValueError); // a surrogate
    CHECK_THROWS_AS(split_gpt2("\xe2\x82"), ValueError);     // cut short
    CHECK_THROWS_WITH(t.decode({50257}), Catch::Contains("id 50257") && Catch::Contains("50257 tokens"));
    CHECK_THROWS_AS(t.decode({-1}), IndexError);

    const std::string dir = (fs::temp_directory_path() / "ember_gpt2_tokenizer").string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    CHECK_THROWS_WITH(GPT2Tokenizer::load(dir), Catch::Contains("[GPT2Tokenizer::load]") &&
                                                    Catch::Contains("cannot read") && Catch::Contains("encoder.json"));
    // One byte changed: the hash says so, naming the file.
    std::string encoder = read(kData + "/encoder.json");
    encoder[10] = encoder[10] == '1' ? '2' : '1';
    std::ofstream(dir + "/encoder.json", std::ios::binary) << encoder;
    fs::copy_file(kData + "/vocab.bpe", dir + "/vocab.bpe");
    CHECK_THROWS_AS(GPT2Tokenizer::load(dir), TokenizerError);
    CHECK_THROWS_WITH(GPT2Tokenizer::load(dir), Catch::Contains("encoder.json") &&
                                                    Catch::Contains("is not OpenAI's file") &&
                                                    Catch::Contains(GPT2Tokenizer::kEncoderSha256));
    fs::remove_all(dir);
}
