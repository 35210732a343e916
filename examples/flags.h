// The command line of ember's example programs, read one way: --flag value
// or --flag=value, switches that take no value, and (where a program has
// one) a positional argument. Bad input is a UsageError that names the flag,
// and the program exits with status 2. Numbers are read whole: "8x", "" or
// "x8" is not a number. Also format(), printf into a std::string, and
// read_file(), the whole of a file a command line names.
// Used by train_gpt (train/options.cpp), train_tasks, gpt_minimal, tokenize,
// gpt2 and explore; threads_and_help by the programs with nothing else to set.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flags {

// A bad command line. (An invalid_argument, so that a program may catch it
// with its other bad arguments, such as a file it cannot read.)
class UsageError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// printf into a std::string.
template <typename... Args>
std::string format(const char* fmt, Args... args) {
    const int n = std::snprintf(nullptr, 0, fmt, args...);
    std::string out(static_cast<size_t>(n > 0 ? n : 0), '\0');
    std::snprintf(out.data(), out.size() + 1, fmt, args...);
    return out;
}

struct Flag {
    std::string name, value; // value is "" for a switch
};

// The command line's flags in order, each checked against the known ones
// before any value is taken for it, so that a mistyped flag is what the
// error names (not the word after it). value_flags take a value,
// switch_flags none. Words that are not flags go to `positional` when it is
// given (else they are an error).
inline std::vector<Flag> parse(int argc, char** argv, const std::set<std::string>& value_flags,
                               const std::set<std::string>& switch_flags,
                               std::vector<std::string>* positional = nullptr) {
    std::vector<Flag> flags;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.rfind("--", 0) != 0) {
            if (!positional) throw UsageError("unexpected argument \"" + arg + "\" (options start with --)");
            positional->push_back(arg);
            continue;
        }
        std::string value;
        const size_t eq = arg.find('=');
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        }
        const bool is_switch = switch_flags.count(arg) > 0;
        if (!is_switch && !value_flags.count(arg)) throw UsageError("unknown option " + arg);
        if (is_switch && eq != std::string::npos) throw UsageError(arg + " takes no value");
        if (!is_switch && eq == std::string::npos) {
            if (i + 1 >= argc) throw UsageError(arg + " needs a value");
            value = argv[++i];
        }
        flags.push_back({arg, value});
    }
    return flags;
}

// `text` read whole by parse (std::stoll, std::stoull, std::stod), or
// nothing: "8x", "" or "x8" is not a number.
template <typename T, typename Parse>
bool read_whole(const std::string& text, Parse parse, T& value) {
    try {
        size_t used = 0;
        value = parse(text, &used);
        return used == text.size();
    } catch (const std::exception&) { // std::invalid_argument (no number) or std::out_of_range
        return false;
    }
}

// An integer in [low, high].
inline int64_t integer(const std::string& flag, const std::string& text, int64_t low, int64_t high) {
    int64_t value = 0;
    if (!read_whole(
            text, [](const std::string& s, size_t* used) { return std::stoll(s, used); }, value))
        throw UsageError(flag + " expects an integer, got \"" + text + "\"");
    if (value < low || value > high)
        throw UsageError(flag + " must be between " + std::to_string(low) + " and " + std::to_string(high) + ", got " +
                         text);
    return value;
}

// A seed: any integer from 0 to 2^64 - 1 (std::stoull alone would read "-1" as 2^64 - 1).
inline uint64_t seed(const std::string& flag, const std::string& text) {
    uint64_t value = 0;
    if (text.empty() || text[0] == '-' ||
        !read_whole(
            text, [](const std::string& s, size_t* used) { return std::stoull(s, used); }, value))
        throw UsageError(flag + " expects an integer from 0 to 2^64 - 1, got \"" + text + "\"");
    return value;
}

// A finite number in [low, high].
inline double real(const std::string& flag, const std::string& text, double low = -INFINITY, double high = INFINITY) {
    double value = 0;
    if (!read_whole(
            text, [](const std::string& s, size_t* used) { return std::stod(s, used); }, value) ||
        !std::isfinite(value))
        throw UsageError(flag + " expects a finite number, got \"" + text + "\"");
    if (value < low || value > high) {
        std::string range = std::isinf(high)  ? format("at least %g", low)
                            : std::isinf(low) ? format("at most %g", high)
                                              : format("between %g and %g", low, high);
        throw UsageError(flag + " must be " + range + ", got " + text);
    }
    return value;
}

// A finite number above zero (a rate, a norm, a temperature).
inline double positive(const std::string& flag, const std::string& text) {
    const double value = real(flag, text);
    if (!(value > 0)) throw UsageError(flag + " must be a positive number, got " + text);
    return value;
}

// The whole file a command line names, or std::invalid_argument saying it
// cannot be read as a file (missing, unreadable, a directory).
inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in || std::filesystem::is_directory(path)) throw std::invalid_argument("cannot read '" + path + "' as a file");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The whole command line of a program that has nothing to set but the
// kernels' threads (the attention_* programs, tensor_views, autograd_demo,
// custom_op, custom_layer): --threads N and --help, and the words that are
// not flags in `positional` when the program takes them (`words` names
// them in the usage line). Returns the status to exit with at once (0
// after printing the usage, `about` in it, for --help; 2 after a bad
// command line, naming `program`, with the usage on stderr), or -1 to go
// on, after set_threads(N) when --threads was given (N from 1 to
// most_threads).
inline int threads_and_help(int argc, char** argv, const std::string& program, const std::string& about,
                            int most_threads, void (*set_threads)(int), std::vector<std::string>* positional = nullptr,
                            const std::string& words = "") {
    const std::string usage = "usage: " + program + (words.empty() ? "" : " " + words) + " [--threads N]\n\n" + about +
                              "\n  --threads N   threads for the kernels (default: every core)\n"
                              "  --help        this text\n";
    try {
        int threads = 0;
        for (const Flag& f : parse(argc, argv, {"--threads"}, {"--help"}, positional)) {
            if (f.name == "--help") {
                std::fputs(usage.c_str(), stdout);
                return 0;
            }
            threads = static_cast<int>(integer(f.name, f.value, 1, most_threads));
        }
        if (threads > 0) set_threads(threads);
        return -1;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: %s\n\n%s", program.c_str(), e.what(), usage.c_str());
        return 2;
    }
}

} // namespace flags
