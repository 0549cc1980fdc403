// recipes_bench: times the built-in proposer's recipes on the starter tasks at
// their timed shapes, against the task's reference compiled -O2 and (matmul)
// OpenBLAS cblas_sgemm in the same process, and against the machine's
// STREAM-triad bandwidth (all cores). Used to tune the recipes' spaces and
// defaults; the table it prints is recorded in docs/benchmarks.md.
//
//   recipes_bench [--tasks=a,b] [--random=N] [--evolve=G] [--reps=N] [--seed=S]
//                 [--genome=recipe{k=v,...}]...
//
// For each task: the proposer's first generation (the default genome of every
// applicable recipe and its seed overrides, then N random genomes), any
// --genome given, then G rounds of 4 mutations of the best so far (the
// proposer's own operators). Each genome is compiled as the worker
// would (g++ -O3 -march=native -fopenmp -fPIC -shared + extra flags), checked
// against the reference on every validation binding and the timed binding,
// and timed (--reps calls after a warm-up call; rates and speedups use the
// fastest call, the median is shown beside it).
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "common/expr.h"
#include "common/task/task_loader.h"
#include "common/tensor.h"
#include "coordinator/proposer/builtin/builtin_proposer.h"
#include "coordinator/proposer/builtin/recipe.h"
#include "tests/coordinator/kernel_harness.h"

extern "C" char* openblas_get_corename(void);
extern "C" int openblas_get_num_threads(void);

namespace kevo {
namespace {

using proposer::BuiltinProposer;
using proposer::Genome;
using proposer::Recipe;

struct Options {
  std::vector<std::string> tasks = {"vector_add", "row_sum", "softmax", "bucketize", "matmul"};
  int random = 2;
  int evolve = 0;
  int reps = 9;
  uint64_t seed = 1;
  std::vector<std::string> genomes;
  std::string source_dir = ".";
};

double Seconds(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  double best = 0;    // fastest wall-clock seconds per call
  double median = 0;  // median wall-clock seconds per call
};

// On a machine shared with other work the median includes the time the
// kernel's threads waited for a core; the fastest call is what the kernel
// does on idle cores (STREAM reports the best too), so rates use it.
Timing TimeCalls(const std::function<void()>& fn, int reps) {
  fn();  // warm-up (page faults, thread pool start)
  std::vector<double> wall;
  for (int i = 0; i < reps; ++i) wall.push_back(Seconds(fn));
  return Timing{*std::min_element(wall.begin(), wall.end()), Median(wall)};
}

// STREAM triad a[i] = b[i] + s*c[i] on doubles, all cores, compiled like a
// candidate; counts 24 bytes per element (no write-allocate), as STREAM does.
double TriadBandwidth(const std::string& dir, int reps) {
  const char* src = R"(#include <cstdint>
extern "C" void triad(double* __restrict a, const double* __restrict b,
                      const double* __restrict c, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0 * c[i];
}
)";
  v1::Candidate c;
  auto k = harness::CompiledKernel::Compile(src, harness::CandidateFlags(c), "triad", dir, "triad");
  if (!k.ok()) {
    std::fprintf(stderr, "triad: %s\n", std::string(k.status().message()).c_str());
    return 0;
  }
  const int64_t n = int64_t{1} << 25;  // 3 x 256 MiB
  harness::AlignedBuffer a(n * 8), b(n * 8), cc(n * 8);
  std::memset(a.data, 0, n * 8);
  for (int64_t i = 0; i < n; ++i) static_cast<double*>(b.data)[i] = 1.0, static_cast<double*>(cc.data)[i] = 2.0;
  std::vector<intptr_t> args = {reinterpret_cast<intptr_t>(a.data), reinterpret_cast<intptr_t>(b.data),
                                reinterpret_cast<intptr_t>(cc.data), n};
  std::vector<double> t;
  (*k)->Call(args);
  for (int i = 0; i < reps; ++i) t.push_back(Seconds([&] { (*k)->Call(args); }));
  std::sort(t.begin(), t.end());
  return 24.0 * n / t[0] / 1e9;  // best, as STREAM reports
}

struct Row {
  std::string task, genome, note;
  double seconds = 0;  // best
  double median_seconds = 0;
  double speedup = 0;
  double rate = 0;  // GB/s or GFLOP/s
  std::string rate_unit;
  double percent = 0;  // of triad bandwidth or of OpenBLAS
  std::string percent_of;
  bool ok = true;
};

void PrintRow(const Row& r) {
  std::printf("| %-10s | %-88s | %9.3f | %9.3f | %8.1fx | %8.1f %-6s | %6.0f%% %-8s |%s\n", r.task.c_str(),
              r.genome.c_str(), r.seconds * 1e3, r.median_seconds * 1e3, r.speedup, r.rate, r.rate_unit.c_str(),
              r.percent, r.percent_of.c_str(), r.ok ? "" : (" FAIL: " + r.note).c_str());
  std::fflush(stdout);
}

class TaskBench {
 public:
  TaskBench(const v1::Task& task, const Options& opt, const std::string& dir, double triad_gbs)
      : task_(task), opt_(opt), dir_(dir), triad_gbs_(triad_gbs) {}

  bool Setup() {
    auto ref = harness::CompiledKernel::Compile(task_.reference().source(), harness::ReferenceFlags(),
                                                task_.signature().function(), dir_, task_.name() + "_ref");
    if (!ref.ok()) {
      std::fprintf(stderr, "%s reference: %s\n", task_.name().c_str(), std::string(ref.status().message()).c_str());
      return false;
    }
    reference_ = *std::move(ref);
    for (const v1::Binding& b : task_.validate()) {
      auto call = harness::MakeTaskCall(task_, b, 1);
      if (!call.ok()) return false;
      reference_->Call((*call)->args);
      validate_want_.push_back(*std::move(call));
    }
    auto want = harness::MakeTaskCall(task_, task_.time(), 1);
    auto got = harness::MakeTaskCall(task_, task_.time(), 1);
    if (!want.ok() || !got.ok()) return false;
    timed_want_ = *std::move(want);
    timed_got_ = *std::move(got);
    const SymbolValues symbols = BindingValues(task_.time());
    bytes_ = static_cast<double>(EvalExpr(task_.bytes_moved(), symbols).value_or(0));
    flops_ = static_cast<double>(EvalExpr(task_.flops(), symbols).value_or(0));
    // The reference is slow at some timed shapes (matmul: seconds): fewer reps.
    double once = Seconds([&] { reference_->Call(timed_want_->args); });
    int reps = once > 0.5 ? 1 : once > 0.05 ? 3 : opt_.reps;
    Timing t = reps == 1 ? Timing{once, once} : TimeCalls([&] { reference_->Call(timed_want_->args); }, reps);
    ref_seconds_ = t.best;
    Row r{task_.name(), "reference (-O2)"};
    r.seconds = ref_seconds_;
    r.median_seconds = t.median;
    r.speedup = 1;
    Fill(r);
    PrintRow(r);
    return true;
  }

  bool is_gemm() const { return task_.hints().count("pattern") && task_.hints().at("pattern") == "gemm"; }

  // OpenBLAS at the timed shape (gemm tasks only); 0 otherwise.
  void TimeOpenBlas() {
    if (!is_gemm()) return;
    const SymbolValues s = BindingValues(task_.time());
    const int m = s.at("M"), n = s.at("N"), k = s.at("K");
    auto call = harness::MakeTaskCall(task_, task_.time(), 1);
    const float* a = reinterpret_cast<const float*>((*call)->args[0]);
    const float* b = reinterpret_cast<const float*>((*call)->args[1]);
    float* c = reinterpret_cast<float*>((*call)->args[2]);
    Timing t = TimeCalls(
        [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n); },
        opt_.reps);
    blas_seconds_ = t.best;
    Row r{task_.name(), absl::StrCat("OpenBLAS cblas_sgemm (core ", openblas_get_corename(), ", ",
                                     openblas_get_num_threads(), " threads)")};
    r.seconds = blas_seconds_;
    r.median_seconds = t.median;
    r.speedup = ref_seconds_ / blas_seconds_;
    Fill(r);
    PrintRow(r);
  }

  // Compiles, checks and times one genome; returns its row (seconds 0 when
  // it failed).
  Row Run(const Genome& genome, const std::string& note = "") {
    Row r{task_.name(), genome.ToString() + note};
    const Recipe* recipe = proposer::FindRecipe(genome.recipe);
    if (recipe == nullptr) {
      r.ok = false, r.note = "unknown recipe";
      return r;
    }
    auto candidate = recipe->Generate(task_, genome);
    if (!candidate.ok()) {
      r.ok = false, r.note = std::string(candidate.status().message());
      return r;
    }
    auto kernel = harness::CompiledKernel::Compile(candidate->source(), harness::CandidateFlags(*candidate),
                                                   task_.signature().function(), dir_,
                                                   absl::StrCat(task_.name(), "_", counter_++));
    if (!kernel.ok()) {
      r.ok = false, r.note = std::string(kernel.status().message()).substr(0, 300);
      return r;
    }
    for (int b = 0; b < task_.validate_size(); ++b) {
      auto got = harness::MakeTaskCall(task_, task_.validate(b), 1);
      (*kernel)->Call((*got)->args);
      absl::Status same = harness::CompareOutputs(task_, **got, *validate_want_[b]);
      if (!same.ok()) {
        r.ok = false, r.note = absl::StrCat(task_.validate(b).name(), ": ", std::string(same.message()));
        return r;
      }
    }
    timed_got_->PoisonOutputs(task_);
    (*kernel)->Call(timed_got_->args);
    absl::Status same = harness::CompareOutputs(task_, *timed_got_, *timed_want_);
    if (!same.ok()) {
      r.ok = false, r.note = absl::StrCat("timed: ", std::string(same.message()));
      return r;
    }
    // Slow kernels (the generic mutator at matmul's timed shape: seconds)
    // get fewer repetitions, like the reference.
    const double once = Seconds([&] { (*kernel)->Call(timed_got_->args); });
    const int reps = once > 0.5 ? 1 : once > 0.05 ? 3 : opt_.reps;
    Timing t = reps == 1 ? Timing{once, once} : TimeCalls([&] { (*kernel)->Call(timed_got_->args); }, reps);
    r.seconds = t.best;
    r.median_seconds = t.median;
    r.speedup = ref_seconds_ / r.seconds;
    Fill(r);
    return r;
  }

  void Fill(Row& r) const {
    if (is_gemm()) {
      r.rate = flops_ / r.seconds / 1e9, r.rate_unit = "GFLOP/s";
      if (blas_seconds_ > 0) r.percent = 100 * blas_seconds_ / r.seconds, r.percent_of = "OpenBLAS";
    } else {
      r.rate = bytes_ / r.seconds / 1e9, r.rate_unit = "GB/s";
      if (triad_gbs_ > 0) r.percent = 100 * r.rate / triad_gbs_, r.percent_of = "triad";
    }
  }

  const v1::Task& task() const { return task_; }

 private:
  const v1::Task& task_;
  const Options& opt_;
  std::string dir_;
  double triad_gbs_;
  std::unique_ptr<harness::CompiledKernel> reference_;
  std::vector<std::unique_ptr<harness::TaskCall>> validate_want_;
  std::unique_ptr<harness::TaskCall> timed_want_, timed_got_;
  double bytes_ = 0, flops_ = 0, ref_seconds_ = 0, blas_seconds_ = 0;
  int counter_ = 0;
};

int Main(int argc, char** argv) {
  Options opt;
  if (const char* d = std::getenv("KEVO_SOURCE_DIR")) opt.source_dir = d;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--tasks=")) {
      opt.tasks = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else if (const char* v = value("--random=")) {
      opt.random = std::atoi(v);
    } else if (const char* v = value("--evolve=")) {
      opt.evolve = std::atoi(v);
    } else if (const char* v = value("--reps=")) {
      opt.reps = std::max(1, std::atoi(v));
    } else if (const char* v = value("--seed=")) {
      opt.seed = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--genome=")) {
      opt.genomes.push_back(v);
    } else if (const char* v = value("--source_dir=")) {
      opt.source_dir = v;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  auto dir = harness::TempDir::Create("kevo_bench_");
  if (!dir.ok()) return 1;
  const double triad = TriadBandwidth((*dir)->path(), 10);
  std::printf("STREAM triad (double, %u threads): %.1f GB/s\n\n", std::thread::hardware_concurrency(), triad);
  std::printf("| %-10s | %-88s | %9s | %9s | %9s | %15s | %16s |\n", "task", "genome", "best ms", "median ms", "vs ref",
              "rate", "roofline");
  std::printf("|------------|%s|-----------|-----------|-----------|-----------------|------------------|\n",
              std::string(90, '-').c_str());

  std::vector<Row> summary;
  for (const std::string& name : opt.tasks) {
    absl::StatusOr<v1::Task> loaded = task::LoadTaskDir(absl::StrCat(opt.source_dir, "/tasks/", name));
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      continue;
    }
    v1::Task task = *loaded;
    TaskBench bench(task, opt, (*dir)->path(), triad);
    if (!bench.Setup()) continue;
    // OpenBLAS first (gemm tasks), so every row can say its share of it; its
    // threads stop spinning long before the pause ends.
    bench.TimeOpenBlas();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // The proposer's own first generation: defaults, their seed overrides,
    // then --random random points.
    std::vector<Genome> genomes;
    BuiltinProposer proposer;
    {
      proposer::ProposeRequest req;
      req.task = &task;
      req.platform = "cpu";
      int fixed = 0;
      for (const Recipe* r : BuiltinProposer::ApplicableRecipes(task, "cpu")) {
        fixed += 1 + static_cast<int>(r->SeedOverrides().size());
      }
      req.count = fixed + opt.random;
      req.seed = opt.seed;
      auto first = proposer.Propose(req);
      if (first.ok()) {
        for (const auto& p : *first) genomes.push_back(p.genome);
      }
    }
    for (const std::string& text : opt.genomes) {
      auto g = Genome::FromString(text);
      if (g.ok() && proposer::FindRecipe(g->recipe) != nullptr &&
          proposer::FindRecipe(g->recipe)->Applies(task, "cpu")) {
        genomes.push_back(*g);
      }
    }
    Row best;
    Genome best_genome;
    std::vector<Row> rows;
    for (const Genome& g : genomes) {
      Row r = bench.Run(g);
      PrintRow(r);
      if (r.ok && (best.seconds == 0 || r.seconds < best.seconds)) best = r, best_genome = g;
    }
    // Evolve: mutate the best with the proposer's own operators.
    for (int round = 0; round < opt.evolve && best.seconds > 0; ++round) {
      proposer::ProposeRequest req;
      req.task = &task;
      req.platform = "cpu";
      req.count = 4;
      req.seed = opt.seed * 1000 + round;
      proposer::ParentInfo parent;
      parent.node_id = "best";
      parent.genome = best_genome;
      req.parents = {parent};
      auto out = proposer.Propose(req);
      if (!out.ok()) break;
      for (const auto& p : *out) {
        Row r = bench.Run(p.genome, "  <- " + p.mutation);
        PrintRow(r);
        if (r.ok && r.seconds < best.seconds) best = r, best_genome = p.genome;
      }
    }
    if (best.seconds > 0) {
      bench.Fill(best);
      best.genome = "BEST " + best_genome.ToString();
      PrintRow(best);
      summary.push_back(best);
    }
    std::printf("\n");
  }
  std::printf("Best per task (triad %.1f GB/s):\n", triad);
  for (const Row& r : summary) PrintRow(r);
  return 0;
}

}  // namespace
}  // namespace kevo

int main(int argc, char** argv) { return kevo::Main(argc, argv); }
