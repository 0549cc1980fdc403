// A main for the fuzz targets where libFuzzer is not linked (the GCC build
// that `make test` runs): every file of the corpus folders named, then
// mutations of them (bit flips, byte sets, inserts, deletions, copies and
// splices of corpus entries, from a fixed seed) until -max_total_time=S
// seconds have passed or -runs=N inputs have run. It has no coverage
// feedback, so it finds less than libFuzzer (`make fuzz`); what it gives
// `make test` is that every committed input, and a few thousand near it,
// still runs clean. A crash or a sanitizer report is the failure; an input
// that ends the process is written to crash-<n> in the working folder first.
//
//   fuzz_task_text [-max_total_time=S] [-runs=N] [-seed=K] DIR_OR_FILE...
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::string current;  // the input running now, written out if it crashes

void WriteCrash(int sig) {
  const std::string name = "crash-" + std::to_string(::getpid());
  if (FILE* f = std::fopen(name.c_str(), "wb")) {
    std::fwrite(current.data(), 1, current.size(), f);
    std::fclose(f);
  }
  std::fprintf(stderr, "fuzz: signal %d on an input of %zu bytes, written to %s\n", sig, current.size(), name.c_str());
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void Run(const std::string& input) {
  current = input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  std::string s = corpus.empty() ? std::string() : corpus[rng() % corpus.size()];
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < edits; ++i) {
    const size_t at = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 6) {
      case 0:
        if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1:
        if (!s.empty()) s[at] = static_cast<char>(rng());
        break;
      case 2:
        s.insert(at, 1 + rng() % 4, static_cast<char>(rng()));
        break;
      case 3:
        if (!s.empty()) s.erase(at, 1 + rng() % std::min<size_t>(s.size() - at, 16));
        break;
      case 4:
        if (!s.empty()) {  // copy a piece of itself elsewhere
          const size_t from = rng() % s.size();
          const std::string piece = s.substr(from, 1 + rng() % 32);
          s.insert(rng() % (s.size() + 1), piece);
        }
        break;
      default:
        if (!corpus.empty()) {  // splice in a piece of another entry
          const std::string& other = corpus[rng() % corpus.size()];
          if (!other.empty()) {
            const size_t from = rng() % other.size();
            s.insert(s.empty() ? 0 : rng() % (s.size() + 1), other.substr(from, 1 + rng() % 64));
          }
        }
    }
  }
  if (s.size() > (1 << 16)) s.resize(1 << 16);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  long runs = -1;
  uint64_t seed = 1;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-max_total_time=", 0) == 0) {
      seconds = std::atof(a.c_str() + 16);
    } else if (a.rfind("-runs=", 0) == 0) {
      runs = std::atol(a.c_str() + 6);
    } else if (a.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    } else if (a.rfind("-", 0) == 0) {
      std::fprintf(stderr, "fuzz: ignoring libFuzzer flag %s\n", a.c_str());
    } else {
      std::vector<fs::path> files;
      if (fs::is_directory(a)) {
        for (const auto& e : fs::directory_iterator(a)) {
          if (e.is_regular_file()) files.push_back(e.path());
        }
      } else {
        files.emplace_back(a);
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) {
          std::fprintf(stderr, "fuzz: cannot read %s\n", f.c_str());
          return 2;
        }
        corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    }
  }
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS}) std::signal(sig, WriteCrash);
  for (const std::string& input : corpus) Run(input);
  std::fprintf(stderr, "fuzz: %zu corpus inputs ran clean\n", corpus.size());
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long done = 0;
  while ((runs < 0 || done < runs) && (runs >= 0 || std::chrono::steady_clock::now() < end)) {
    Run(Mutate(corpus, rng));
    ++done;
  }
  std::fprintf(stderr, "fuzz: %ld mutated inputs ran clean (seed %llu)\n", done, static_cast<unsigned long long>(seed));
  return 0;
}
