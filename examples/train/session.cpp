// Settings, data, model and header of a train_gpt run: see session.h.
#include "session.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/tensor/platform.h"
#include "corpus.h"
#include "memory.h"
#include "model.h"
#include "outputs.h"
#include "progress.h"
#include "results.h"

namespace train {

using namespace ember;

namespace {

const char* kGeneratedPlay = "(generated play)"; // the data_name of the default corpus

// The settings of a resumed run: the checkpoint's, which fix the model, the
// data and the batches, with what may change taken from the command line
// (output, threads, sampling, attention map, a larger --max-iters, and the
// learning rate and clipping, to go on more gently after a divergence).
Options resumed_options(const Options& given, const RunState& run) {
    for (const char* flag :
         {"--preset", "--tokenizer", "--model", "--bias", "--tie-weights", "--n-embd", "--n-head", "--n-layer",
          "--block-size", "--dropout", "--batch-size", "--grad-accum", "--eval-interval", "--eval-iters", "--seed"})
        if (given.given.count(flag))
            throw UsageError(std::string(flag) + " cannot change when resuming (the checkpoint fixes it)");
    Options o = run.options;
    o.resume = given.resume;
    // The run goes on writing where its checkpoint is, unless told otherwise.
    const std::string folder = std::filesystem::path(given.resume).parent_path().string();
    o.out_dir = given.given.count("--out") ? given.out_dir : folder.empty() ? "." : folder;
    o.threads = given.threads;
    o.sample_tokens = given.sample_tokens;
    o.temperature = given.temperature;
    o.top_k = given.top_k;
    o.sample_seed = given.sample_seed;
    o.attention_map = given.attention_map;
    o.prompt = given.prompt;
    o.overwrite = given.overwrite;
    o.divergence_ratio = given.divergence_ratio;
    if (given.given.count("--max-iters")) o.max_iters = given.max_iters; // training longer is fine
    if (given.given.count("--lr")) o.lr = given.lr;
    if (given.given.count("--max-grad-norm")) o.max_grad_norm = given.max_grad_norm;
    // The rest of the optimiser's settings may change too (the schedule, to go on longer or gentler).
    if (given.given.count("--warmup-iters")) o.warmup_iters = given.warmup_iters;
    if (given.given.count("--lr-decay-iters")) o.lr_decay_iters = given.lr_decay_iters;
    if (given.given.count("--min-lr")) o.min_lr = given.min_lr;
    if (given.given.count("--beta1")) o.beta1 = given.beta1;
    if (given.given.count("--beta2")) o.beta2 = given.beta2;
    if (given.given.count("--weight-decay")) o.weight_decay = given.weight_decay;
    o.data_path = given.given.count("--data") ? given.data_path : run.data_name == kGeneratedPlay ? "" : run.data_name;
    return o;
}

// Which model runs, and why: the header's model line ends with it.
std::string model_line(const ModelConfig& m) {
    if (m.stage != Stage::GPT) return "in the lecture's classes (this stage of the video, line for line)";
    if (m.kind == ModelKind::Lecture) return "in the lecture's classes (--model lecture: gpt.py, line for line)";
    if (m.kind == ModelKind::NanoGPT)
        return std::string("in the fast model as nanoGPT's model.py (GELU, ") + (m.bias ? "biases" : "no biases") +
               (m.tie_weights ? ", lm_head tied to wte" : "") + ", nanoGPT's initialisation)";
    return "in the fast model (gpt.py's function and weights, with fused attention; --model lecture runs gpt.py's "
           "classes)";
}

// The process id of mpirun, when it is this rank's parent (one machine),
// else a description of where to find it.
std::string mpirun_pid() {
    const std::string parent = std::to_string(ember::internal::parent_process_id());
    std::ifstream comm("/proc/" + parent + "/comm");
    std::string name;
    std::getline(comm, name);
    return name == "mpirun" || name == "mpiexec" || name == "orterun" ? parent : "<mpirun's process id>";
}

void print_header(const Session& s, size_t text_chars) {
    const Options& o = s.run.options;
    const int64_t vocab_size = s.run.vocab.size();
    std::cout << "data: " << s.run.data_name << ", " << text_chars << " characters, ";
    if (!s.run.vocab.is_chars())
        std::cout << s.data.train.numel() + s.data.val.numel() << " tokens of --tokenizer " << s.run.vocab.tokenizer()
                  << ", ";
    std::cout << "vocabulary of " << vocab_size << "\n";
    std::cout << "model: " << o.preset << " (" << stage_name(o.model.stage) << "), "
              << format("%.6f M parameters", static_cast<double>(s.model->num_parameters()) / 1e6) << ", "
              << model_line(o.model) << "\n";
    std::cout << "expected starting loss ln(" << vocab_size << ") = " << format("%.4f", std::log(double(vocab_size)))
              << "\n";
    if (const int world = distributed::get_world_size(); world > 1) {
        std::cout << "processes: " << world << " (mpirun), each computing " << o.batch_size / world
                  << " rows of every batch of " << o.batch_size << "\n";
        // Ctrl-C makes mpirun kill the ranks a second after asking them to
        // save; SIGUSR1 it only forwards (docs/distributed.md).
        std::cout << "to stop and save: kill -USR1 " << mpirun_pid() << " (Ctrl-C saves only what a second allows)\n";
    }
    if (s.run.next_step > 0) std::cout << "resuming at step " << s.run.next_step << " from " << o.resume << "\n";
    std::cout << std::flush; // a log file shows the header before the first, possibly slow, evaluation
}

// The files the run writes: the checkpoints, then the others.
std::vector<RunFile> checkpoint_files(const Options& o) {
    return {{o.out_dir + "/" + kCheckpointName, "--out's checkpoint"},
            {o.out_dir + "/" + kBestCheckpointName, "--out's best checkpoint"}};
}

std::vector<RunFile> other_outputs(const Options& o) {
    std::vector<RunFile> files;
    for (const char* name : {"losses.csv", "loss.svg", "sample.txt", "explore.html"})
        files.push_back({o.out_dir + "/" + name, "--out's " + std::string(name)});
    files.push_back(o.attention_map.empty() ? RunFile{o.out_dir + "/attention.svg", "--out's attention.svg"}
                                            : RunFile{o.attention_map, "--attention-map"});
    return files;
}

// Whether `a` and `b` name the same existing file.
bool same_file(const std::string& a, const std::string& b) {
    std::error_code error;
    return std::filesystem::equivalent(a, b, error);
}

// Makes --out a folder this run alone writes, and checks every output
// before the first step (outputs.h): the lock, no earlier run's checkpoint
// lost, no input overwritten, every file writable; then removes what
// killed saves left behind.
FolderLock prepare_outputs(const Options& o, bool& stale_best) {
    std::error_code error;
    std::filesystem::create_directories(o.out_dir, error);
    if (error || !std::filesystem::is_directory(o.out_dir))
        throw InputError("--out " + o.out_dir + ": cannot make it a directory" + (error ? ": " + error.message() : ""));
    FolderLock lock = lock_folder(o.out_dir);
    const std::string checkpoint = checkpoint_files(o)[0].path;
    // A resumed run goes on writing its own folder's checkpoints (resumed
    // from the latest or the best one); anything else there is another run's.
    const bool own_folder =
        !o.resume.empty() && (same_file(o.resume, checkpoint) || same_file(o.resume, checkpoint_files(o)[1].path));
    for (const RunFile& earlier : checkpoint_files(o))
        if (std::filesystem::exists(earlier.path) && !own_folder && !o.overwrite)
            throw InputError(earlier.path +
                             " holds an earlier run, which this one would overwrite. Continue it "
                             "with --resume " +
                             earlier.path +
                             ", write this run elsewhere with --out DIR, or pass "
                             "--overwrite to replace it");
    std::vector<RunFile> outputs = checkpoint_files(o), others = other_outputs(o);
    outputs.insert(outputs.end(), others.begin(), others.end());
    // An earlier run's best checkpoint goes when this run saves its first (loop.cpp).
    stale_best = !own_folder && std::filesystem::exists(checkpoint_files(o)[1].path);
    refuse_overlaps(outputs, {{o.data_path, "--data"}});
    refuse_overlaps(others, {{o.resume, "--resume"}}); // the checkpoints replace it, whole, on purpose
    for (const RunFile& file : outputs) check_writable(file.path, file.flag);
    if (const int removed = remove_orphans(outputs); removed > 0)
        std::cout << "removed " << removed << " temporary file" << (removed > 1 ? "s" : "")
                  << " that interrupted saves left in " << o.out_dir << "\n";
    return lock;
}

// Under mpirun: the ranks whose `value` differs from rank 0's (none with one
// process). all_reduce_mean carries doubles, so the value travels in 16-bit
// pieces, which a double holds exactly, summed with zeros from the others.
std::vector<int> ranks_differing_from_rank_0(uint64_t value) {
    const int world = distributed::get_world_size(), rank = distributed::get_rank();
    if (world == 1) return {};
    bool differs = false;
    for (int piece = 0; piece < 4; ++piece) {
        const double mine = static_cast<double>((value >> (16 * piece)) & 0xFFFF);
        const double rank0 = world * distributed::all_reduce_mean(rank == 0 ? mine : 0.0);
        differs = differs || std::llround(rank0) != std::llround(mine);
    }
    std::vector<int> ranks;
    for (int r = 1; r < world; ++r)
        if (distributed::all_reduce_mean(r == rank && differs ? 1.0 : 0.0) > 0) ranks.push_back(r);
    return ranks;
}

// Under mpirun, every rank must run the same run: different flags, or
// different copies of a checkpoint, trained silently wrong or hung at the
// end. The checks below refuse them; every rank finds the same answer and
// throws alike (rank 0 prints it).

// What every rank must share: the settings that shape training and the text...
uint64_t settings_fingerprint(const Options& o, uint64_t data_fingerprint) {
    const ModelConfig& m = o.model;
    const std::string optimiser =
        format("%d %d %lld %lld %.17g %.17g %.17g %.17g %lld", o.model.bias ? 1 : 0, o.model.tie_weights ? 1 : 0,
               static_cast<long long>(o.warmup_iters), static_cast<long long>(o.lr_decay_iters), o.min_lr, o.beta1,
               o.beta2, o.weight_decay, static_cast<long long>(o.grad_accum));
    return fingerprint(optimiser +
                       format("%s %s %lld %lld %lld %lld %lld %.17g %lld %.17g %.17g %lld %lld %lld %llu %.17g %llu",
                              stage_name(m.stage), kind_name(m.kind), static_cast<long long>(m.vocab_size),
                              static_cast<long long>(m.block_size), static_cast<long long>(m.n_embd),
                              static_cast<long long>(m.n_head), static_cast<long long>(m.n_layer), m.dropout,
                              static_cast<long long>(o.batch_size), o.lr, o.max_grad_norm,
                              static_cast<long long>(o.max_iters), static_cast<long long>(o.eval_interval),
                              static_cast<long long>(o.eval_iters), static_cast<unsigned long long>(o.seed),
                              o.divergence_ratio, static_cast<unsigned long long>(data_fingerprint)));
}

// ... and the state they start from: the step, the losses so far, the
// generator (another copy of a checkpoint differs in one of them) and AdamW's.
uint64_t state_fingerprint(const Session& s) {
    std::string bytes = std::to_string(s.run.next_step);
    const std::vector<uint8_t> rng = default_generator().get_state();
    bytes.append(reinterpret_cast<const char*>(rng.data()), rng.size());
    bytes.append(reinterpret_cast<const char*>(s.run.step_losses.data()), s.run.step_losses.size() * sizeof(double));
    for (const auto& [name, t] : s.optimizer->state_dict()) {
        const Tensor c = t.contiguous();
        bytes += name;
        bytes.append(static_cast<const char*>(c.storage()->data()) + c.storage_offset() * element_size(c.dtype()),
                     static_cast<size_t>(c.numel()) * element_size(c.dtype()));
    }
    return fingerprint(bytes);
}

// "rank 2" or "ranks 1, 3".
std::string named(const std::vector<int>& ranks) {
    std::string text;
    for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return (ranks.size() == 1 ? "rank " : "ranks ") + text;
}

void require_same_settings(const Options& o, uint64_t data_fingerprint) {
    if (auto ranks = ranks_differing_from_rank_0(settings_fingerprint(o, data_fingerprint)); !ranks.empty())
        throw UsageError(named(ranks) + " of " + std::to_string(distributed::get_world_size()) +
                         " differ from rank 0 in their settings (flags such as --lr or --max-iters, the "
                         "checkpoint's, or the --data text): every rank of mpirun must be given the same");
}

void require_same_state(const Session& s) {
    if (auto ranks = ranks_differing_from_rank_0(state_fingerprint(s)); !ranks.empty())
        throw InputError(named(ranks) + " of " + std::to_string(distributed::get_world_size()) +
                         " resume from another state than rank 0 (another copy of the checkpoint: its step, "
                         "losses, generator or AdamW state differ): give every rank the same file");
}

} // namespace

Session start_session(Options o) {
    Session s;
    RunState& run = s.run;
    if (!o.resume.empty()) {
        run = read_run(o.resume);
        o = resumed_options(o, run);
        check_options(o); // the checkpoint's settings with the flags that changed them
    }

    if (run.next_step >= o.max_iters)
        throw UsageError("the checkpoint already ran " + std::to_string(run.next_step) +
                         " steps; pass a larger --max-iters to train longer");

    // ---- data ---------------------------------------------------------------------------
    std::string text = o.data_path.empty() ? default_corpus() : read_text_file(o.data_path);
    Vocab vocab = o.tokenizer.empty() ? Vocab::from_text(text) : Vocab::from_tokenizer(o.tokenizer);
    o.model.vocab_size = vocab.size();
    // Under mpirun -np N each process computes B/N rows of the batch of B.
    const int world = distributed::get_world_size();
    if (world > 1 && (o.model.stage != Stage::GPT || o.model.kind == ModelKind::Lecture))
        throw UsageError("training on " + std::to_string(world) +
                         " processes (mpirun) is the fast model's: run the default preset or --preset lecture, "
                         "without --model lecture");
    if (o.batch_size % world != 0)
        throw UsageError("--batch-size " + std::to_string(o.batch_size) + " must be divisible by the " +
                         std::to_string(world) +
                         " processes mpirun started: each computes an equal share of the batch");
    // Refuse a run that cannot fit before its model, optimiser and batches are allocated
    // (per process: its share of the batch).
    MemoryEstimate need = estimate_memory(o.model, o.batch_size / world, static_cast<double>(text.size()));
    std::string too_large =
        memory_problem(need, available_memory(), "--n-embd, --n-layer, --batch-size or --block-size",
                       processes_on_this_machine());
    if (!too_large.empty()) throw UsageError(too_large);
    if (!o.resume.empty()) {
        if (!vocab.is_chars() && vocab.tokens() != run.vocab.tokens())
            throw InputError("--tokenizer " + o.tokenizer +
                             " is not the tokenizer the checkpoint was trained with: their tokens differ");
        if (fingerprint(text) != run.data_fingerprint || vocab.tokens() != run.vocab.tokens())
            throw InputError("the checkpoint was trained on other data than " +
                             (o.data_path.empty() ? std::string("the generated play") : o.data_path));
    }
    run.options = o;
    run.vocab = vocab;
    run.data_fingerprint = fingerprint(text);
    run.data_name = o.data_path.empty() ? kGeneratedPlay : o.data_path;
    s.data = split_90_10(from_vector(vocab.encode(text)));
    check_split_lengths(s.data, o.model.block_size,
                        o.data_path.empty() ? "the generated play" : "--data " + o.data_path, vocab.unit());
    if (!o.attention_map.empty() && !has_attention(o.model))
        throw UsageError(std::string("--attention-map: the ") + stage_name(o.model.stage) + " model" +
                         (o.model.n_layer == 0 ? " with --n-layer 0" : "") + " has no attention");
    if (!o.prompt.empty()) attention_prompt(o, vocab, ""); // its characters are in the vocabulary

    require_same_settings(o, run.data_fingerprint); // under mpirun

    // ---- outputs, prepared by rank 0 (the others wait for its answer) ---------------------
    std::string problem;
    if (distributed::get_rank() == 0 && !o.summary) { // --summary writes nothing
        try {
            s.lock = prepare_outputs(o, s.stale_best);
        } catch (const std::runtime_error& e) {
            problem = e.what();
        }
    }
    if (distributed::all_reduce_mean(problem.empty() ? 0.0 : 1.0) > 0)
        throw InputError(problem.empty() ? "rank 0 could not prepare --out " + o.out_dir : problem);
    s.checkpoint = checkpoint_files(o)[0].path;
    s.best_checkpoint = checkpoint_files(o)[1].path;

    // ---- model and optimiser (drawing from the seeded generator, as the lecture) --------
    manual_seed(o.seed);
    s.model = make_model(o.model);
    const optim::AdamWOptions adamw{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .weight_decay = o.weight_decay};
    if (o.model.kind == ModelKind::NanoGPT) {
        // nanoGPT's configure_optimizers: the 2-d tensors (weights,
        // embeddings) decay, biases and LayerNorms do not.
        std::vector<Tensor> decay, no_decay;
        for (const Tensor& p : s.model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
        s.optimizer = std::make_unique<optim::AdamW>(std::vector<optim::AdamWParamGroup>{{decay, o.weight_decay},
                                                                                         {no_decay, 0.0}},
                                                     adamw);
    } else {
        s.optimizer = std::make_unique<optim::AdamW>(s.model->parameters(), adamw);
    }
    if (!o.resume.empty()) restore_run(o.resume, *s.model, s.optimizer.get());
    // Every rank built (or restored) the same weights from the same seed (or
    // file); rank 0's are copied to all the same, as DistributedDataParallel does.
    distributed::broadcast_parameters(*s.model);
    require_same_state(s);
    if (!o.resume.empty() && same_file(o.resume, s.checkpoint)) s.saved_step = run.next_step;
    // The best checkpoint the resumed run's record names is this folder's
    // only when the run goes on in its own folder, and the file is there.
    const bool own_folder = same_file(o.resume, s.checkpoint) || same_file(o.resume, s.best_checkpoint);
    if (!own_folder || !std::filesystem::exists(s.best_checkpoint))
        run.best_file_step = -1, run.best_file_val = INFINITY;

    print_header(s, text.size());
    return s;
}

} // namespace train
