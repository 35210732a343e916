#include "process.h"

#include <sys/wait.h>

#include <cstdio>

#include <catch2/catch.hpp>

namespace ember::testing {

CommandResult run_command(const std::string& command) {
    FILE* pipe = popen(command.c_str(), "r");
    REQUIRE(pipe);
    std::string out;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    int status = pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

} // namespace ember::testing
