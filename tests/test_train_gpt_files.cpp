// What train_gpt does with a user's files and signals (examples/train/
// outputs.h, guard.h, loop.h): a run that gets worse keeps the best and the
// last good checkpoint; no new run starts over another run's checkpoint,
// and none while another writes the folder; outputs are checked before the
// first step and never overwrite an input or follow a planted link; killed
// saves leave nothing behind; SIGTERM and SIGHUP save as Ctrl-C does, and
// Ctrl-C stops an evaluation; every setting read from a checkpoint is
// checked as its flag is. docs/training.md ("What happens to your
// checkpoints"); the faults are listed in docs/testing.md.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "../examples/train/run_state.h"
#include "train_gpt_run.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;

namespace {

// train_gpt started in the background with `args`, its stdout and stderr
// in `log`; returns its process id.
pid_t start(const std::vector<std::string>& args, const std::string& log) {
    pid_t child = fork();
    if (child == 0) {
        if (!freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(99);
        exec_train_gpt(args);
    }
    return child;
}

// Runs train_gpt with `args` where no file may grow past `bytes` (setrlimit
// RLIMIT_FSIZE, with SIGXFSZ ignored: a write past it fails with EFBIG, as
// one to a full disk fails with ENOSPC). Its output comes through a pipe,
// which the limit does not touch. Returns its status and output.
CommandResult run_with_file_limit(const std::vector<std::string>& args, rlim_t bytes) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    pid_t child = fork();
    if (child == 0) {
        const rlimit limit{bytes, bytes};
        std::signal(SIGXFSZ, SIG_IGN); // stays ignored across exec
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(97);
        if (dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0) _exit(99);
        close(out[0]);
        exec_train_gpt(args);
    }
    close(out[1]);
    std::string printed;
    char buffer[4096];
    for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) printed.append(buffer, static_cast<size_t>(n));
    close(out[0]);
    int status = 0;
    waitpid(child, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, printed};
}

// Waits (up to a minute) until `log` contains `words`.
bool wait_for(const std::string& log, const std::string& words) {
    for (int i = 0; i < 1200; ++i) {
        if (read_file(log).find(words) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

// The exit status of `child`, or -1 if a signal ended it.
int wait_exit(pid_t child) {
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string kTiny = "--preset bigram --max-iters 2 --eval-iters 1 --sample-tokens 5";

} // namespace

TEST_CASE("a run whose val loss rises far above its best stops with status 3, keeping both checkpoints",
          "[train_gpt][files]") {
    // The case: --resume with a learning rate far too high raised
    // the val loss from 2.78 to 17.8 (finite), exited 0 and replaced the
    // only checkpoint.
    std::string dir = scratch_dir("rising");
    REQUIRE(run("--preset bigram --max-iters 200 --eval-interval 100 --eval-iters 5 --sample-tokens 5 --out " + dir)
                .status == 0);
    const std::string latest = read_file(dir + "/train_gpt.safetensors");
    const std::string best = read_file(dir + "/train_gpt.best.safetensors");
    CHECK(latest == best); // the last evaluation was the lowest
    CommandResult r = run("--resume " + dir + "/train_gpt.safetensors --lr 100 --max-iters 300 --out " + dir);
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(r.out.find("the val loss rose to ") != std::string::npos);
    CHECK(r.out.find("more than 2 times its lowest") != std::string::npos);
    CHECK(r.out.find("--lr 10") != std::string::npos);
    CHECK(r.out.find("final:") == std::string::npos);
    CHECK(read_file(dir + "/train_gpt.safetensors") == latest);
    CHECK(read_file(dir + "/train_gpt.best.safetensors") == best);
    // The threshold is the user's: a generous one lets the same run finish,
    // and its best checkpoint stays the better state of step 200.
    r = run("--resume " + dir + "/train_gpt.safetensors --lr 100 --max-iters 300 --sample-tokens 5 " +
            "--divergence-ratio 1000 --out " + dir);
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("the lowest val loss, ") != std::string::npos);
    CHECK(read_file(dir + "/train_gpt.best.safetensors") == best);
    CHECK(train::read_run(dir + "/train_gpt.safetensors").next_step == 300);
    CHECK(run("--divergence-ratio 1 --out " + dir).status == 2);
    fs::remove_all(dir);
}

TEST_CASE("a resumed run knows the whole run's best, the final evaluations' included", "[train_gpt][files]") {
    // The final evaluation (step 250, val 2.568) was never in the history
    // of evaluations, so a resumed run took step 200's 2.782 for the best
    // and let step 300's 2.744 (--lr 3) replace the better best checkpoint.
    std::string dir = scratch_dir("best_resumed");
    REQUIRE(run("--preset bigram --max-iters 250 --eval-interval 100 --eval-iters 5 --sample-tokens 5 --out " + dir)
                .status == 0);
    const train::RunState first = train::read_run(dir + "/train_gpt.safetensors");
    CHECK(first.best_step == 250);
    CHECK(first.best_file_step == 250);
    CHECK(train::read_run(dir + "/train_gpt.best.safetensors").next_step == 250);
    const std::string best = read_file(dir + "/train_gpt.best.safetensors");
    CommandResult r = run("--resume " + dir + "/train_gpt.safetensors --max-iters 300 --lr 3 --sample-tokens 5");
    INFO(r.out);
    REQUIRE(r.status == 0);
    // The scenario: step 300's val loss lies between step 250's (the best)
    // and step 200's (the best of the recorded evaluations).
    const size_t at = r.out.find("step 300: train loss ");
    REQUIRE(at != std::string::npos);
    const double val_300 = std::stod(r.out.substr(r.out.find("val loss ", at) + 9));
    REQUIRE(first.evals.back().step == 200);
    CHECK(val_300 > first.best_val);
    CHECK(val_300 < first.evals.back().val_loss);
    CHECK(r.out.find(flags::format("the lowest val loss, %.4f at step 250, is in", first.best_val)) !=
          std::string::npos);
    CHECK(read_file(dir + "/train_gpt.best.safetensors") == best);
    CHECK(train::read_run(dir + "/train_gpt.safetensors").best_file_step == 250);
    // --summary writes nothing, so a folder that holds a run is no obstacle.
    CHECK(run("--summary --out " + dir).status == 0);
    fs::remove_all(dir);
}

TEST_CASE("no run starts over another run's checkpoint, or while another writes the folder", "[train_gpt][files]") {
    std::string dir = scratch_dir("clobber");
    REQUIRE(run(kTiny + " --out " + dir).status == 0);
    const std::string first = read_file(dir + "/train_gpt.safetensors");
    for (const std::string& args : {kTiny, std::string("--preset layernorm --max-iters 3")}) {
        CommandResult r = run(args + " --out " + dir);
        INFO(r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find("holds an earlier run, which this one would overwrite") != std::string::npos);
        CHECK(r.out.find("--overwrite") != std::string::npos);
    }
    // An empty path never means "no checkpoint".
    for (const char* flag : {"--resume", "--sample-only", "--out", "--data", "--attention-map"}) {
        CommandResult r = run(std::string(flag) + " '' --out " + dir);
        INFO(r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find(std::string(flag) + " needs ") != std::string::npos);
    }
    CHECK(read_file(dir + "/train_gpt.safetensors") == first);
    // Resuming into the same folder goes on; --overwrite starts over.
    CHECK(run("--resume " + dir + "/train_gpt.safetensors --max-iters 3 --sample-tokens 5 --out " + dir).status == 0);
    CHECK(run(kTiny + " --seed 7 --overwrite --out " + dir).status == 0);
    CHECK(train::read_run(dir + "/train_gpt.safetensors").options.seed == 7);

    // A second run in a folder a run is writing is refused, naming the first.
    std::string busy = scratch_dir("busy");
    const std::string log = scratch_dir("busy_log") + "/log.txt";
    pid_t first_run = start({"--max-iters", "100000", "--out", busy}, log);
    REQUIRE(wait_for(log, "step 0:"));
    CommandResult second = run("--max-iters 10 --overwrite --out " + busy);
    INFO(second.out);
    CHECK(second.status == 2);
    CHECK(second.out.find("is in use by another train_gpt run: process " + std::to_string(first_run)) !=
          std::string::npos);
    CHECK(second.out.find("--max-iters 100000") != std::string::npos); // its command line
    kill(first_run, SIGTERM);
    CHECK(wait_exit(first_run) == 128 + SIGTERM);
    // The lock goes with the process, however it ends.
    CHECK(run("--max-iters 2 --eval-iters 1 --sample-tokens 5 --overwrite --out " + busy).status == 0);
    fs::remove_all(dir);
    fs::remove_all(busy);
    fs::remove_all(fs::path(log).parent_path());
}

TEST_CASE("outputs are checked before the first step and never overwrite an input", "[train_gpt][files]") {
    std::string dir = scratch_dir("outputs");
    const std::string data = dir + "/input.txt";
    std::ofstream(data) << std::string(3000, 'a') + std::string(3000, 'b') + "\n";
    const std::string text = read_file(data);
    auto refused = [&](const std::string& args, const std::string& words) {
        CommandResult r = run(args);
        INFO(r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find(words) != std::string::npos);
        CHECK(r.out.find("step 0:") == std::string::npos); // before any work
    };
    refused("--data " + data + " --attention-map " + data + " --out " + dir + "/o1",
            "--attention-map " + data + " is the file --data reads");
    refused("--data " + data + " --out " + dir + " --attention-map " + dir + "/sub/../input.txt", "is the file --data");
    std::ofstream(dir + "/losses.csv") << std::string(3000, 'x') + std::string(3000, 'y');
    refused("--data " + dir + "/losses.csv --out " + dir,
            "--out's losses.csv " + dir + "/losses.csv is the file --data");
    refused("--attention-map " + dir + "/o2/train_gpt.safetensors --out " + dir + "/o2", "is also --out's checkpoint");
    refused("--attention-map /proc/ember_map.svg --out " + dir + "/o3", "cannot write in /proc");
    refused("--attention-map " + dir + "/no/such/folder/map.svg --out " + dir + "/o4", "cannot write in ");
    refused("--prompt 'Z~' --data " + data + " --out " + dir + "/o5", "--prompt: ");
    refused("--n-layer 0 --attention-map " + dir + "/map.svg --out " + dir + "/o6",
            "with --n-layer 0 has no attention");
    refused("--temperature 1e-300 --out " + dir + "/o7", "--temperature must be at least 1e-06");
    CHECK(read_file(data) == text);
    // With no attention to draw, --n-layer 0 trains and draws nothing.
    CommandResult r = run("--n-layer 0 --max-iters 2 --eval-iters 1 --sample-tokens 5 --out " + dir + "/o8");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(!fs::exists(dir + "/o8/attention.svg"));
    fs::remove_all(dir);
}

TEST_CASE("temporary files are created exclusively beside their target, and orphans removed", "[train_gpt][files]") {
    std::string dir = scratch_dir("tmpfiles"), out = dir + "/out";
    fs::create_directories(out);
    // Links planted where older versions wrote their fixed temporary names.
    const std::string victim = dir + "/victim.txt";
    std::ofstream(victim) << "precious";
    for (const char* name : {"losses.csv.tmp", "train_gpt.safetensors.tmp", "loss.svg.tmp", "sample.txt.tmp"})
        fs::create_symlink(victim, out + "/" + name);
    // What a kill -9 during a save leaves: the checkpoint's temporary file.
    std::ofstream(out + "/train_gpt.safetensors.tmp.Ab3dEf") << std::string(1000, 'z');
    std::ofstream(out + "/notes.tmp.Ab3dEf") << "not ours";
    CommandResult r = run(kTiny + " --out " + out);
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("removed 1 temporary file that interrupted saves left in " + out) != std::string::npos);
    CHECK(read_file(victim) == "precious");
    CHECK(!fs::exists(out + "/train_gpt.safetensors.tmp.Ab3dEf"));
    CHECK(fs::exists(out + "/notes.tmp.Ab3dEf"));
    for (const auto& entry : fs::directory_iterator(out)) {
        const std::string name = entry.path().filename().string();
        INFO(name);
        CHECK((name.find(".tmp.") == std::string::npos || name == "notes.tmp.Ab3dEf"));
    }
    fs::remove_all(dir);
}

TEST_CASE("a save that fails (a full disk) is reported, the run goes on, and the old file stays",
          "[train_gpt][files]") {
    std::string dir = scratch_dir("full_disk");
    REQUIRE(run(kTiny + " --out " + dir).status == 0);
    const std::string before = read_file(dir + "/train_gpt.safetensors"); // about 43 kB
    // Room for losses.csv and the pictures, not for a checkpoint.
    CommandResult r = run_with_file_limit({"--preset", "bigram", "--max-iters", "300", "--eval-interval", "100",
                                           "--eval-iters", "1", "--sample-tokens", "5", "--overwrite", "--out", dir},
                                          20000);
    INFO(r.out);
    CHECK(r.status == 4);
    for (const char* step : {"100", "200", "300"}) // each failure said, and training went on to the end
        CHECK(r.out.find(std::string("could not save the checkpoint of step ") + step) != std::string::npos);
    CHECK(r.out.find("step 300: train loss") != std::string::npos);
    CHECK(r.out.find("File too large") != std::string::npos); // the system's reason
    CHECK(read_file(dir + "/train_gpt.safetensors") == before);
    for (const auto& entry : fs::directory_iterator(dir))
        CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
    // A divergence on a full disk (room for 2,048 bytes: more than the
    // 1,024-byte file LLVM's OpenMP runtime writes as it starts, without
    // which it aborts; less than losses.csv's 200 steps): the explanation
    // and status 3 stay (they were lost to "internal error", status 1, when
    // losses.csv failed).
    r = run_with_file_limit({"--preset", "bigram", "--lr", "100", "--eval-interval", "200", "--max-iters", "400",
                             "--eval-iters", "1", "--overwrite", "--out", dir},
                            2048);
    INFO(r.out);
    CHECK(r.status == 3);
    CHECK(r.out.find("stopped at step 200: the val loss rose to ") != std::string::npos);
    CHECK(r.out.find("The losses of the steps before could not be written: ") != std::string::npos);
    CHECK(r.out.find("internal error") == std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("SIGTERM and SIGHUP save as Ctrl-C does; Ctrl-C stops an evaluation", "[train_gpt][files]") {
    // Each saves as Ctrl-C does (the same path, whose exact resume
    // test_train_gpt.cpp checks): the checkpoint of the step it stopped
    // after, which a resumed run takes up.
    for (int signal : {SIGTERM, SIGHUP}) {
        DYNAMIC_SECTION("signal " << signal) {
            std::string dir = scratch_dir("signal");
            const std::string log = dir + "/log.txt";
            pid_t child =
                start({"--max-iters", "100000", "--eval-interval", "1000", "--eval-iters", "1", "--out", dir}, log);
            REQUIRE(wait_for(log, "step 0:"));
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            kill(child, signal);
            const int status = wait_exit(child);
            const std::string printed = read_file(log);
            INFO(printed);
            CHECK(status == 128 + signal);
            const size_t at = printed.find("after step ");
            REQUIRE(at != std::string::npos);
            const int64_t last = std::stoll(printed.substr(at + 11));
            CHECK(printed.find("checkpoint saved to " + dir + "/train_gpt.safetensors") != std::string::npos);
            CHECK(train::read_run(dir + "/train_gpt.safetensors").next_step == last + 1);
            CommandResult resumed = run("--resume " + dir + "/train_gpt.safetensors --max-iters " +
                                        std::to_string(last + 3) + " --sample-tokens 5");
            INFO(resumed.out);
            CHECK(resumed.status == 0);
            CHECK(resumed.out.find("resuming at step " + std::to_string(last + 1)) != std::string::npos);
            fs::remove_all(dir);
        }
    }
    SECTION("a signal the run was started ignoring stays ignored (nohup)") {
        std::string dir = scratch_dir("nohup");
        const std::string log = dir + "/log.txt";
        pid_t child = fork();
        if (child == 0) {
            if (!freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(99);
            default_stop_signals();
            std::signal(SIGHUP, SIG_IGN); // what nohup does
            execl(kProgram.c_str(), "train_gpt", "--max-iters", "100000", "--out", dir.c_str(),
                  static_cast<char*>(nullptr));
            _exit(98);
        }
        REQUIRE(wait_for(log, "step 0:"));
        kill(child, SIGHUP); // the terminal closes: the run goes on
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        CHECK(waitpid(child, nullptr, WNOHANG) == 0);
        kill(child, SIGTERM);
        CHECK(wait_exit(child) == 128 + SIGTERM);
        INFO(read_file(log));
        CHECK(read_file(log).find("stopped by SIGTERM") != std::string::npos);
        fs::remove_all(dir);
    }
    SECTION("Ctrl-C during an evaluation") {
        // An estimate of 10^6 batches would take hours; Ctrl-C ends it at once.
        std::string dir = scratch_dir("eval_interrupt");
        const std::string log = dir + "/log.txt";
        pid_t child = start({"--eval-iters", "1000000", "--out", dir}, log);
        REQUIRE(wait_for(log, "expected starting loss"));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        kill(child, SIGINT); // before, ignored: this waited for hours (the suite's timeout fails it)
        const int status = wait_exit(child);
        INFO(read_file(log));
        CHECK(status == 130);
        CHECK(read_file(log).find("nothing new to save") != std::string::npos);
        fs::remove_all(dir);
    }
}

TEST_CASE("hostile input files are refused for what they are, before being read", "[train_gpt][files]") {
    // A FIFO or /dev/zero hung and grew memory; 8 GB of zeros given to
    // --resume was read whole first. Outside the sanitizer build (whose
    // shadow memory needs a larger address space) the program runs with
    // 2 GB of address space, in which reading 8 GB fails.
    std::string dir = scratch_dir("hostile");
    const std::string fifo = dir + "/fifo", zeros = dir + "/zeros", huge = dir + "/huge";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    auto sparse = [](const std::string& path, int64_t bytes) { // zeros that take no disk space
        std::ofstream out(path, std::ios::binary);
        out.seekp(bytes - 1);
        out.put('\0');
    };
    sparse(zeros, int64_t{200} << 20);
    sparse(huge, int64_t{8} << 30);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--data " + fifo, "is not a regular file"},
        {"--data /dev/zero", "is not a regular file"},
        {"--data " + zeros, "is not text: it holds a NUL byte at offset 0"},
        {"--data " + huge, "(17 bytes per character), but only"}, // on a machine of less than 136 GB
        {"--resume " + fifo, "not a regular file"},
        {"--resume /dev/zero", "not a regular file"},
        {"--resume " + huge, "the header does not start with '{'"},
        {"--resume " + dir + "/missing", "No such file or directory"},
        {"--sample-only " + huge, "the header does not start with '{'"},
    };
#if defined(EMBER_ASAN)
    const std::string limit = "";
#else
    const std::string limit = "ulimit -v 2000000 && ";
#endif
    for (const auto& [args, words] : cases) {
        CommandResult r = run_command(limit + kProgram + " " + args + " --out " + dir + "/out 2>&1");
        INFO(args << ": " << r.out);
        CHECK(r.status == 2);
        const bool roomy = r.out.find("NUL byte at offset 0") != std::string::npos; // more memory than 17 x 8 GB
        CHECK((r.out.find(words) != std::string::npos || (args == "--data " + huge && roomy)));
    }
    fs::remove_all(dir);
}

TEST_CASE("every setting read from a checkpoint is checked as its flag is", "[train_gpt][files]") {
    // eval_interval=0 divided by zero (SIGFPE); eval_iters=0 printed NaN
    // losses and exited 0; n_layer=1e8 built a model for ever.
    std::string dir = scratch_dir("settings");
    REQUIRE(run("--max-iters 2 --eval-iters 1 --sample-tokens 5 --n-layer 1 --out " + dir).status == 0);
    nn::Metadata meta;
    const nn::StateDict good = nn::load_safetensors(dir + "/train_gpt.safetensors", &meta);
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {"eval_interval", "0", "--eval-interval must be between 1 and"},
        {"eval_iters", "0", "--eval-iters must be between 1 and"},
        {"n_head", "0", "--n-head must be between 1 and"},
        {"n_embd", "-64", "--n-embd must be between 1 and"},
        {"block_size", "0", "--block-size must be between 1 and"},
        {"batch_size", "0", "--batch-size must be between 1 and"},
        {"max_iters", "0", "--max-iters must be between 1 and"},
        {"n_layer", "-1", "--n-layer must be between 0 and"},
        {"dropout", "1", "--dropout must be in [0, 1)"},
        {"dropout", "nan", "--dropout expects a finite number"},
        {"lr", "-1", "--lr must be at least 0"},
        {"max_grad_norm", "0", "--max-grad-norm must be a positive number"},
        {"n_embd", "63", "--n-embd (63) must be divisible by --n-head (4)"},
        {"seed", "-1", "--seed expects an integer"},
    };
    for (const auto& [key, value, words] : cases) {
        nn::Metadata bad = meta;
        bad[key] = value;
        nn::save_safetensors(good, dir + "/bad.safetensors", bad);
        for (const char* how : {"--resume", "--sample-only"}) {
            CommandResult r =
                run(std::string(how) + " " + dir + "/bad.safetensors --max-iters 4 --overwrite --out " + dir + "/o");
            INFO(key << "=" << value << ", " << how << ": " << r.out);
            CHECK(r.status == 2);
            if (key != "n_embd" || value != "63") // a check between two settings names both
                CHECK(r.out.find("\"" + key + "\" = \"" + value + "\": ") != std::string::npos);
            CHECK(r.out.find(words) != std::string::npos);
        }
    }
    // A model too large for the machine is refused before it is built.
    nn::Metadata huge = meta;
    huge["n_layer"] = "100000000";
    nn::save_safetensors(good, dir + "/huge.safetensors", huge);
    for (const char* how : {"--resume", "--sample-only"}) {
        CommandResult r = run(std::string(how) + " " + dir + "/huge.safetensors --max-iters 4 --out " + dir + "/o");
        INFO(how << ": " << r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find("needs about") != std::string::npos); // before, it built for ever
    }
    fs::remove_all(dir);
}
