// Starting train_gpt from a test as a user would, with a scratch folder
// for its outputs: shared by test_train_gpt.cpp and test_train_gpt_files.cpp.
#pragma once

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "process.h"

namespace ember::testing {

inline const std::string kProgram = std::string(EMBER_EXAMPLES_DIR) + "/train_gpt";

// Runs train_gpt with `args` (a shell-quoted string): its exit status, and
// stdout and stderr together in `out`.
inline CommandResult run(const std::string& args) { return run_command(kProgram + " " + args + " 2>&1"); }

// Column `column` of a run's losses.csv, for the rows that have it.
inline std::vector<double> csv_column(const std::string& path, int column) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::string line;
    std::getline(in, line); // header
    std::vector<double> values;
    while (std::getline(in, line)) {
        std::stringstream fields(line);
        std::string field;
        for (int c = 0; c <= column; ++c) std::getline(fields, field, ',');
        if (!field.empty()) values.push_back(std::stod(field));
    }
    return values;
}

// A fresh empty directory for one test's outputs.
inline std::string scratch_dir(const std::string& name) {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ember_train_gpt_" + name + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

// In a child about to exec train_gpt: the stop signals as a terminal gives
// them (a test runner started in the background may ignore SIGINT, and an
// ignored signal stays ignored across exec, and so in train_gpt).
inline void default_stop_signals() {
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) std::signal(signal, SIG_DFL);
}

// In a forked child: becomes train_gpt with `args`, its stop signals as a
// terminal gives them.
[[noreturn]] inline void exec_train_gpt(const std::vector<std::string>& args) {
    std::vector<char*> argv{const_cast<char*>("train_gpt")};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    default_stop_signals();
    execv(kProgram.c_str(), argv.data());
    _exit(98);
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace ember::testing
