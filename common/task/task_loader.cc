#include "common/task/task_loader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"

#include "common/expr.h"
#include "common/status.h"
#include "common/tensor.h"

namespace kevo::task {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::TextFormat;

// Keeps the first error the text-format parser reports (later ones are
// usually consequences of the first).
class FirstErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = -1;
  int column_ = -1;
  std::string message_;
};

// "a/b:3:7: " for a known place (0-based line/column in), "a/b: " otherwise.
std::string Prefix(const std::string& path, int line, int column) {
  std::string where = path.empty() ? std::string("task") : path;
  if (line < 0) return absl::StrCat(where, ": ");
  return absl::StrCat(where, ":", line + 1, ":", column + 1, ": ");
}

// Byte offset of a 0-based (line, column) of the protobuf tokenizer, whose
// columns advance to the next multiple of 8 at a tab; npos when out of range.
size_t OffsetOf(const std::string& text, int line, int column) {
  size_t pos = 0;
  for (int l = 0; l < line; ++l) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return pos;
    ++pos;
  }
  int col = 0;
  while (pos < text.size() && text[pos] != '\n' && col < column) {
    col = text[pos] == '\t' ? col + 8 - col % 8 : col + 1;
    ++pos;
  }
  return pos;
}

// The 0-based (line, column) of byte `offset` of `text`, tab-aware like the
// protobuf tokenizer.
std::pair<int, int> LineColumnOf(const std::string& text, size_t offset) {
  int line = 0, col = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 0;
    } else {
      col = text[i] == '\t' ? col + 8 - col % 8 : col + 1;
    }
  }
  return {line, col};
}

// A text-format parse error in kevo's wording. Protobuf reports some errors
// at the token after the culprit (e.g. the ':' after an unknown field name);
// `token`, when set, is the culprit, and the error moves back to it.
struct ParseError {
  std::string message;
  std::string token;
};

// Rewrites protobuf's text-format messages into kevo's wording where it is
// clearer; other messages pass through without their final period.
ParseError RewriteParseMessage(std::string message) {
  if (!message.empty() && message.back() == '.') message.pop_back();
  // Message type "kevo.v1.TensorSpec" has no field named "shpe"
  static constexpr char kType[] = "Message type \"";
  static constexpr char kNoField[] = "\" has no field named \"";
  if (message.rfind(kType, 0) == 0) {
    size_t type_end = message.find(kNoField);
    if (type_end != std::string::npos && message.back() == '"') {
      std::string type = message.substr(sizeof(kType) - 1, type_end - (sizeof(kType) - 1));
      size_t field_start = type_end + sizeof(kNoField) - 1;
      std::string field = message.substr(field_start, message.size() - 1 - field_start);
      return {absl::StrCat("unknown field '", field, "' in ", type), field};
    }
  }
  // Unknown enumeration value of "F33" for field "dtype"
  static constexpr char kEnum[] = "Unknown enumeration value of \"";
  static constexpr char kForField[] = "\" for field \"";
  if (message.rfind(kEnum, 0) == 0) {
    size_t value_end = message.find(kForField);
    if (value_end != std::string::npos && message.back() == '"') {
      std::string value = message.substr(sizeof(kEnum) - 1, value_end - (sizeof(kEnum) - 1));
      size_t field_start = value_end + sizeof(kForField) - 1;
      std::string field = message.substr(field_start, message.size() - 1 - field_start);
      std::string expected;
      if (field == "dtype") {
        std::vector<std::string> names;
        const auto* dtype = v1::DType_descriptor();
        for (int i = 1; i < dtype->value_count(); ++i) names.push_back(dtype->value(i)->name());
        expected = absl::StrCat(" (expected one of ", absl::StrJoin(names, ", "), ")");
      }
      return {absl::StrCat("unknown value '", value, "' for field '", field, "'", expected), value};
    }
  }
  return {message, ""};
}

absl::StatusOr<std::string> ReadFile(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(what, " '", path.string(), "' does not exist"));
  }
  if (!fs::is_regular_file(path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(what, " '", path.string(), "' is not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnknownError(absl::StrCat("cannot open ", what, " '", path.string(), "'"));
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return absl::UnknownError(absl::StrCat("cannot read ", what, " '", path.string(), "'"));
  return out.str();
}

bool IsCIdentifier(const std::string& s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!alpha(s[0])) return false;
  for (char c : s) {
    if (!alpha(c) && !digit(c)) return false;
  }
  return true;
}

// One step of a field path from the Task root: a field name and, for
// repeated fields, the element index.
struct Step {
  const char* field;
  int index = -1;
};

// Builds error statuses that name where in the task file a field was written.
class Reporter {
 public:
  explicit Reporter(const TaskSource& source) : source_(source) {}

  // InvalidArgument "<path>:<line>:<col>: <message>" at the deepest step of
  // `steps` whose location is known, or "<path>: <message>".
  absl::Status Error(std::initializer_list<Step> steps, const std::string& message) const {
    int line = -1, column = -1;
    Locate(steps, &line, &column);
    return absl::InvalidArgumentError(absl::StrCat(Prefix(source_.path, line, column), message));
  }

  // The same prefix for a status that did not come from this task's fields.
  std::string PrefixFor(std::initializer_list<Step> steps) const {
    int line = -1, column = -1;
    Locate(steps, &line, &column);
    return Prefix(source_.path, line, column);
  }

 private:
  void Locate(std::initializer_list<Step> steps, int* line, int* column) const {
    const TextFormat::ParseInfoTree* tree = source_.tree;
    const Descriptor* desc = v1::Task::descriptor();
    for (const Step& step : steps) {
      if (tree == nullptr || desc == nullptr) return;
      const FieldDescriptor* field = desc->FindFieldByName(step.field);
      if (field == nullptr) return;
      int index = field->is_repeated() ? std::max(step.index, 0) : -1;
      TextFormat::ParseLocation loc = tree->GetLocation(field, index);
      // A list (`shape: ["a", "b"]`) records one location for all its
      // elements: fall back to the latest earlier element that has one.
      for (int i = index - 1; loc.line < 0 && i >= 0; --i) loc = tree->GetLocation(field, i);
      if (loc.line < 0) return;
      *line = loc.line;
      *column = loc.column;
      if (field->type() != FieldDescriptor::TYPE_MESSAGE) return;
      tree = tree->GetTreeForNested(field, index);
      desc = field->message_type();
    }
  }

  const TaskSource source_;
};

}  // namespace

const std::vector<std::string>& KnownOpFamilies() {
  static const auto* families = new std::vector<std::string>{
      "elementwise", "reduction", "softmax", "norm", "matmul", "conv", "loss", "preprocessing", "sparse", "fusion"};
  return *families;
}

const std::vector<std::string>& KnownPlatforms() {
  static const auto* platforms = new std::vector<std::string>{"cpu", "nvidia", "amd", "mtia-sim"};
  return *platforms;
}

v1::Task TimedOn(const v1::Task& task, const std::string& platform) {
  v1::Task out = task;
  for (const v1::PlatformBinding& pb : task.time_on()) {
    if (pb.platform() == platform) *out.mutable_time() = pb.binding();
  }
  return out;
}

absl::StatusOr<v1::Task> ParseTaskText(const std::string& text, const std::string& path,
                                       TextFormat::ParseInfoTree* tree) {
  v1::Task task;
  FirstErrorCollector errors;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (tree != nullptr) parser.WriteLocationsTo(tree);
  if (!parser.ParseFromString(text, &task)) {
    if (!errors.has_error()) {
      return absl::InvalidArgumentError(absl::StrCat(Prefix(path, -1, -1), "cannot parse task"));
    }
    ParseError error = RewriteParseMessage(errors.message());
    int line = errors.line(), column = errors.column();
    if (!error.token.empty()) {
      size_t at = text.rfind(error.token, OffsetOf(text, line, column));
      if (at != std::string::npos) std::tie(line, column) = LineColumnOf(text, at);
    }
    return absl::InvalidArgumentError(absl::StrCat(Prefix(path, line, column), error.message));
  }
  return task;
}

void ApplyTaskDefaults(v1::Task* task) {
  if (task->seeds() == 0) task->set_seeds(kDefaultSeeds);
}

absl::Status ValidateTask(const v1::Task& task, const TaskSource& source, const TaskLimits& limits) {
  const Reporter r(source);

  // Identity.
  if (task.name().empty()) return r.Error({}, "field 'name' is missing: every task needs a name");
  const auto& families = KnownOpFamilies();
  if (task.op_family().empty()) {
    return r.Error({}, absl::StrCat("field 'op_family' is missing; expected one of ", absl::StrJoin(families, ", ")));
  }
  if (std::find(families.begin(), families.end(), task.op_family()) == families.end()) {
    return r.Error({{"op_family"}}, absl::StrCat("unknown op_family '", task.op_family(), "'; expected one of ",
                                                 absl::StrJoin(families, ", ")));
  }
  if (!task.has_signature()) return r.Error({}, "field 'signature' is missing");
  if (!IsCIdentifier(task.signature().function())) {
    return r.Error({{"signature"}, {"function"}},
                   absl::StrCat("signature function '", task.signature().function(), "' is not a valid C identifier"));
  }

  // Tensors: names, dtypes, shapes. Collect the symbols the shapes use.
  if (task.outputs_size() == 0) return r.Error({}, "the task has no outputs");
  std::map<std::string, std::string> shape_symbols;  // symbol -> a tensor using it
  std::set<std::string> tensor_names;
  for (const char* kind : {"inputs", "outputs"}) {
    const bool is_input = std::string(kind) == "inputs";
    const auto& tensors = is_input ? task.inputs() : task.outputs();
    for (int i = 0; i < tensors.size(); ++i) {
      const v1::TensorSpec& t = tensors[i];
      if (!IsCIdentifier(t.name())) {
        return r.Error({{kind, i}, {"name"}},
                       absl::StrCat(kind, "[", i, "]: tensor name '", t.name(), "' is not a valid C identifier"));
      }
      if (!tensor_names.insert(t.name()).second) {
        return r.Error({{kind, i}, {"name"}}, absl::StrCat("tensor name '", t.name(), "' is used twice"));
      }
      if (t.dtype() == v1::DTYPE_UNSPECIFIED) {
        return r.Error({{kind, i}}, absl::StrCat("tensor '", t.name(), "' has no dtype"));
      }
      if (t.shape_size() == 0) {
        return r.Error({{kind, i}}, absl::StrCat("tensor '", t.name(), "' has no shape (give at least one dimension)"));
      }
      for (int j = 0; j < t.shape_size(); ++j) {
        auto syms = ExprSymbols(t.shape(j));
        if (!syms.ok()) {
          return r.Error({{kind, i}, {"shape", j}}, absl::StrCat("tensor '", t.name(), "' dimension ", j,
                                                                 ": bad shape ", syms.status().message()));
        }
        for (const std::string& s : *syms) shape_symbols.emplace(s, t.name());
      }
      const v1::Distribution& d = t.distribution();
      if (!is_input && d.kind_case() != v1::Distribution::KIND_NOT_SET) {
        return r.Error({{kind, i}, {"distribution"}},
                       absl::StrCat("output '", t.name(), "' has a distribution; only inputs do"));
      }
      auto bad_range = [&](const std::string& what) {
        return r.Error({{kind, i}, {"distribution"}}, absl::StrCat("tensor '", t.name(), "': ", what));
      };
      if (d.has_uniform() && !(d.uniform().low() < d.uniform().high())) {
        return bad_range("uniform distribution needs low < high");
      }
      if (d.has_sorted_uniform() && !(d.sorted_uniform().low() < d.sorted_uniform().high())) {
        return bad_range("sorted_uniform distribution needs low < high");
      }
      if (d.has_normal() && !(d.normal().stddev() >= 0)) {
        return bad_range("normal distribution needs stddev >= 0");
      }
      if (d.has_int_range() && d.int_range().low() > d.int_range().high()) {
        return bad_range("int_range distribution needs low <= high");
      }
    }
  }

  // Bindings name their symbols; a binding key no shape uses is allowed only
  // when the signature, bytes_moved or flops uses it.
  std::set<std::string> formula_symbols;
  for (const auto& [field, expr] :
       {std::pair<const char*, const std::string*>{"bytes_moved", &task.bytes_moved()}, {"flops", &task.flops()}}) {
    if (expr->empty()) {
      return r.Error({}, absl::StrCat("field '", field,
                                      "' is missing: give an expression over the "
                                      "shape symbols (used for the roofline)"));
    }
    auto syms = ExprSymbols(*expr);
    if (!syms.ok()) {
      return r.Error({{field}}, absl::StrCat("bad ", field, " ", syms.status().message()));
    }
    formula_symbols.insert(syms->begin(), syms->end());
  }

  // Signature parameters: each names a tensor or a symbol, once; every tensor
  // is a parameter.
  std::set<std::string> params;
  for (int i = 0; i < task.signature().params_size(); ++i) {
    const std::string& p = task.signature().params(i);
    if (!params.insert(p).second) {
      return r.Error({{"signature"}, {"params", i}}, absl::StrCat("signature parameter '", p, "' appears twice"));
    }
    if (tensor_names.count(p) > 0) continue;
    if (shape_symbols.count(p) == 0) {
      return r.Error({{"signature"}, {"params", i}},
                     absl::StrCat("signature parameter '", p, "' names no input, output or shape symbol"));
    }
  }
  for (const std::string& name : tensor_names) {
    if (params.count(name) == 0) {
      return r.Error({{"signature"}}, absl::StrCat("tensor '", name,
                                                   "' is not a signature parameter; the "
                                                   "candidate could not see it"));
    }
  }
  auto rendered = RenderSignature(task);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(r.PrefixFor({{"signature"}}), rendered.status().message()));
  }

  // Bindings.
  if (task.validate_size() < 2) {
    return r.Error({{"validate", 0}}, absl::StrCat("needs at least two validate bindings (one of them odd-sized), "
                                                   "found ",
                                                   task.validate_size()));
  }
  if (!task.has_time()) {
    return r.Error({}, "field 'time' is missing: give the binding to time");
  }
  std::set<std::string> known_symbols;
  for (const auto& [s, t] : shape_symbols) known_symbols.insert(s);
  known_symbols.insert(formula_symbols.begin(), formula_symbols.end());

  std::set<std::string> binding_names;
  bool any_odd = false;
  auto check_binding = [&](const v1::Binding& b, Step step, const std::string& label) -> absl::Status {
    for (const auto& [sym, tensor] : shape_symbols) {
      if (!b.values().contains(sym)) {
        return r.Error({step}, absl::StrCat(label, " gives no value for symbol '", sym,
                                            "' (used by the shape of tensor '", tensor, "')"));
      }
    }
    for (const std::string& sym : formula_symbols) {
      if (!b.values().contains(sym)) {
        return r.Error({step},
                       absl::StrCat(label, " gives no value for symbol '", sym, "' (used by bytes_moved or flops)"));
      }
    }
    std::vector<std::pair<std::string, int64_t>> sorted(b.values().begin(), b.values().end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [sym, value] : sorted) {
      if (known_symbols.count(sym) == 0) {
        return r.Error({step}, absl::StrCat(label, " sets '", sym, "', which no shape, bytes_moved or flops uses"));
      }
      if (value <= 0) {
        return r.Error({step}, absl::StrCat(label, " sets '", sym, "' to ", value, "; symbol values must be positive"));
      }
    }
    const SymbolValues values = BindingValues(b);
    // What the binding asks a worker to hold: every size checked, none wrapped.
    int64_t total_bytes = 0;
    for (const char* kind : {"inputs", "outputs"}) {
      const auto& tensors = std::string(kind) == "inputs" ? task.inputs() : task.outputs();
      for (const v1::TensorSpec& t : tensors) {
        auto bytes = TensorBytes(t, values);
        if (!bytes.ok()) {
          return r.Error({step}, absl::StrCat(label, ": ", bytes.status().message()));
        }
        if (*bytes > limits.max_tensor_bytes) {
          return r.Error({step}, absl::StrCat(label, ": tensor '", t.name(), "' is ", FormatBytes(*bytes), " (", *bytes,
                                              " bytes of ", std::string(DTypeName(t.dtype())), "), above the limit of ",
                                              FormatBytes(limits.max_tensor_bytes), " per tensor"));
        }
        if (__builtin_add_overflow(total_bytes, *bytes, &total_bytes) || total_bytes > limits.max_binding_bytes) {
          return r.Error(
              {step},
              absl::StrCat(label, ": its tensors, up to and including '", t.name(), "', are ",
                           total_bytes < 0 ? std::string("more bytes than int64 holds")
                                           : absl::StrCat(FormatBytes(total_bytes), " (", total_bytes, " bytes)"),
                           ", above the limit of ", FormatBytes(limits.max_binding_bytes), " per binding"));
        }
      }
    }
    // Integer bounds that follow the binding must evaluate under it.
    for (int i = 0; i < task.inputs_size(); ++i) {
      const v1::Distribution::IntRange& range = task.inputs(i).distribution().int_range();
      if (!task.inputs(i).distribution().has_int_range()) continue;
      int64_t lo = range.low(), hi = range.high();
      for (auto [expr, bound] : {std::pair{&range.low_expr(), &lo}, std::pair{&range.high_expr(), &hi}}) {
        if (expr->empty()) continue;
        auto v = EvalExpr(*expr, values);
        if (!v.ok()) {
          return r.Error({{"inputs", i}, {"distribution"}},
                         absl::StrCat("tensor '", task.inputs(i).name(), "': int_range bound '", *expr, "' under ",
                                      label, ": ", v.status().message()));
        }
        *bound = *v;
      }
      if (lo > hi) {
        return r.Error({{"inputs", i}, {"distribution"}},
                       absl::StrCat("tensor '", task.inputs(i).name(), "': int_range under ", label, " is [", lo, ", ",
                                    hi, "]; it needs low <= high"));
      }
    }
    for (const auto& [field, expr] :
         {std::pair<const char*, const std::string*>{"bytes_moved", &task.bytes_moved()}, {"flops", &task.flops()}}) {
      auto v = EvalExpr(*expr, values);
      if (!v.ok()) {
        return r.Error({{field}}, absl::StrCat(field, " under ", label, ": ", v.status().message()));
      }
      if (*v < 0) {
        return r.Error({{field}}, absl::StrCat(field, " under ", label, " is negative (", *v, ")"));
      }
    }
    return absl::OkStatus();
  };
  for (int k = 0; k < task.validate_size(); ++k) {
    const v1::Binding& b = task.validate(k);
    if (b.name().empty()) {
      return r.Error({{"validate", k}}, absl::StrCat("validate binding ", k, " has no name (reports use it)"));
    }
    if (!binding_names.insert(b.name()).second) {
      return r.Error({{"validate", k}}, absl::StrCat("validate binding name '", b.name(), "' is used twice"));
    }
    KEVO_RETURN_IF_ERROR(check_binding(b, {"validate", k}, absl::StrCat("validate binding '", b.name(), "'")));
    for (const auto& [sym, value] : b.values()) any_odd |= (value % 2) != 0;
  }
  if (!any_odd) {
    return r.Error({{"validate", 0}},
                   "no validate binding is odd-sized: give one binding an odd value for some "
                   "symbol (e.g. 33 or 1001) so that tail handling is checked");
  }
  KEVO_RETURN_IF_ERROR(check_binding(task.time(), {"time"}, "time binding"));
  std::set<std::string> timed_platforms;
  for (int k = 0; k < task.time_on_size(); ++k) {
    const v1::PlatformBinding& pb = task.time_on(k);
    const auto& known = KnownPlatforms();
    if (std::find(known.begin(), known.end(), pb.platform()) == known.end()) {
      return r.Error({{"time_on", k}}, absl::StrCat("time_on ", k, " names platform '", pb.platform(),
                                                    "'; known platforms: ", absl::StrJoin(known, ", ")));
    }
    if (!timed_platforms.insert(pb.platform()).second) {
      return r.Error({{"time_on", k}}, absl::StrCat("time_on names platform '", pb.platform(),
                                                    "' twice; give one timed binding per platform"));
    }
    if (!pb.has_binding() || pb.binding().name().empty()) {
      return r.Error({{"time_on", k}},
                     absl::StrCat("time_on '", pb.platform(), "' has no binding with a name (reports use it)"));
    }
    KEVO_RETURN_IF_ERROR(
        check_binding(pb.binding(), {"time_on", k}, absl::StrCat("time_on '", pb.platform(), "' binding")));
  }

  // Production baselines (docs/task-format.md): what a user runs today.
  if (!task.production_baseline().empty()) {
    return r.Error({{"production_baseline"}},
                   absl::StrCat("production_baseline '", task.production_baseline(),
                                "' is retired: name what a user runs with production { torch: "
                                "\"<PyTorch expression>\" vendor: \"gemm(A, B)\" }"));
  }
  std::set<std::string> production_platforms;
  for (int k = 0; k < task.production_size(); ++k) {
    const v1::ProductionBaseline& p = task.production(k);
    const auto& known = KnownPlatforms();
    if (!p.platform().empty() && std::find(known.begin(), known.end(), p.platform()) == known.end()) {
      return r.Error({{"production", k}}, absl::StrCat("production ", k, " names platform '", p.platform(),
                                                       "'; known platforms: ", absl::StrJoin(known, ", "),
                                                       " (or none, for every platform)"));
    }
    if (!production_platforms.insert(p.platform()).second) {
      return r.Error({{"production", k}},
                     absl::StrCat("two production entries for ",
                                  p.platform().empty() ? "every platform" : "platform '" + p.platform() + "'"));
    }
    if (p.torch().empty() && p.vendor().empty()) {
      return r.Error({{"production", k}}, "a production entry needs a 'torch' expression or a 'vendor' call (or both)");
    }
    if (!p.vendor().empty() && !absl::StartsWith(p.vendor(), "gemm(") && !absl::StartsWith(p.vendor(), "gemv(")) {
      return r.Error({{"production", k}, {"vendor"}},
                     absl::StrCat("vendor call '", p.vendor(),
                                  "' is not one kevo times: gemm(A, B[, trans_a=True][, trans_b=True]) or gemv(A, x)"));
    }
  }
  if (task.production_size() > 0 && !task.no_production_reason().empty()) {
    return r.Error({{"no_production_reason"}},
                   "the task names a production baseline and a reason it has none; keep one");
  }

  // Seeds, reference, tolerances.
  if (task.seeds() != 0 && task.seeds() < kDefaultSeeds) {
    return r.Error({{"seeds"}}, absl::StrCat("seeds is ", task.seeds(), "; it must be at least ", kDefaultSeeds,
                                             " (or unset for ", kDefaultSeeds, ")"));
  }
  if (!task.has_reference()) {
    return r.Error({}, "field 'reference' is missing: name the C++ reference file");
  }
  if (task.reference().language() != "c++") {
    return r.Error({{"reference"}, {"language"}}, absl::StrCat("reference language '", task.reference().language(),
                                                               "' is not supported; native tasks use \"c++\""));
  }
  const std::string& file = task.reference().file();
  if (file.empty()) return r.Error({{"reference"}}, "reference has no 'file'");
  const fs::path file_path(file);
  bool escapes = file_path.is_absolute();
  for (const auto& part : file_path) escapes |= part == "..";
  if (escapes) {
    return r.Error({{"reference"}, {"file"}}, absl::StrCat("reference file '", file,
                                                           "' must be relative to the task folder "
                                                           "and stay inside it"));
  }
  std::set<int> tolerance_dtypes;
  for (int i = 0; i < task.tolerances_size(); ++i) {
    const v1::Tolerance& t = task.tolerances(i);
    if (t.dtype() == v1::DTYPE_UNSPECIFIED) {
      return r.Error({{"tolerances", i}}, "tolerance has no dtype");
    }
    if (!IsFloat(t.dtype())) {
      return r.Error({{"tolerances", i}}, absl::StrCat("tolerance for ", std::string(DTypeName(t.dtype())),
                                                       ": integers are always compared exactly"));
    }
    if (!tolerance_dtypes.insert(t.dtype()).second) {
      return r.Error({{"tolerances", i}}, absl::StrCat("two tolerances for ", std::string(DTypeName(t.dtype()))));
    }
    if (!(t.atol() >= 0) || !(t.rtol() >= 0) || !std::isfinite(t.atol()) || !std::isfinite(t.rtol())) {
      return r.Error({{"tolerances", i}}, absl::StrCat("tolerance for ", std::string(DTypeName(t.dtype())),
                                                       " must have finite, non-negative atol and rtol (got ", t.atol(),
                                                       ", ", t.rtol(), ")"));
    }
  }
  return absl::OkStatus();
}

// Reads every listed extra reference, then adds reference_mtia.cc when the
// folder has one and no "mtia-c++" reference is listed, and reference.cu
// likewise as language "cuda".
absl::Status LoadExtraReferences(const fs::path& folder, v1::Task* task, const Reporter& r) {
  bool has_mtia = false;
  bool has_cuda = false;
  for (int i = 0; i < task->extra_references_size(); ++i) {
    v1::Reference* ref = task->mutable_extra_references(i);
    const std::string& file = ref->file();
    if (ref->language().empty() || file.empty()) {
      return r.Error({{"extra_references", i}}, "an extra reference needs a 'language' and a 'file'");
    }
    const fs::path rel(file);
    for (const auto& part : rel) {
      if (rel.is_absolute() || part == "..") {
        return r.Error(
            {{"extra_references", i}, {"file"}},
            absl::StrCat("extra reference file '", file, "' must be relative to the task folder and stay inside it"));
      }
    }
    auto source = ReadFile(folder / rel, "extra reference file");
    if (!source.ok()) {
      return absl::Status(source.status().code(),
                          absl::StrCat(r.PrefixFor({{"extra_references", i}, {"file"}}), source.status().message()));
    }
    ref->set_source(*std::move(source));
    has_mtia |= ref->language() == kMtiaReferenceLanguage;
    has_cuda |= ref->language() == kCudaReferenceLanguage;
  }
  std::error_code ec;
  if (!has_mtia && fs::is_regular_file(folder / kMtiaReferenceFile, ec)) {
    KEVO_ASSIGN_OR_RETURN(std::string source, ReadFile(folder / kMtiaReferenceFile, "MTIA reference"));
    v1::Reference* ref = task->add_extra_references();
    ref->set_language(kMtiaReferenceLanguage);
    ref->set_file(kMtiaReferenceFile);
    ref->set_source(std::move(source));
  }
  if (!has_cuda && fs::is_regular_file(folder / kCudaReferenceFile, ec)) {
    KEVO_ASSIGN_OR_RETURN(std::string source, ReadFile(folder / kCudaReferenceFile, "CUDA reference"));
    v1::Reference* ref = task->add_extra_references();
    ref->set_language(kCudaReferenceLanguage);
    ref->set_file(kCudaReferenceFile);
    ref->set_source(std::move(source));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Task> LoadTaskDir(const std::string& dir) {
  const fs::path folder(dir);
  std::error_code ec;
  if (!fs::exists(folder, ec)) {
    return absl::NotFoundError(absl::StrCat("task folder '", dir, "' does not exist"));
  }
  if (!fs::is_directory(folder, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("'", dir, "' is not a folder"));
  }
  const fs::path task_file = folder / kTaskFileName;
  const std::string path = task_file.lexically_normal().string();
  KEVO_ASSIGN_OR_RETURN(std::string text, ReadFile(task_file, "task file"));

  TextFormat::ParseInfoTree tree;
  KEVO_ASSIGN_OR_RETURN(v1::Task task, ParseTaskText(text, path, &tree));
  ApplyTaskDefaults(&task);
  KEVO_RETURN_IF_ERROR(ValidateTask(task, TaskSource{path, &tree}));

  const fs::path reference = folder / task.reference().file();
  auto source = ReadFile(reference, "reference file");
  if (!source.ok()) {
    const Reporter r(TaskSource{path, &tree});
    return absl::Status(source.status().code(),
                        absl::StrCat(r.PrefixFor({{"reference"}, {"file"}}), source.status().message()));
  }
  task.mutable_reference()->set_source(*std::move(source));
  KEVO_RETURN_IF_ERROR(LoadExtraReferences(folder, &task, Reporter(TaskSource{path, &tree})));
  return task;
}

absl::StatusOr<std::vector<std::string>> FindTaskDirs(const std::string& root) {
  std::error_code ec;
  const fs::path base(root);
  if (!fs::exists(base, ec)) {
    return absl::NotFoundError(absl::StrCat("'", root, "' does not exist"));
  }
  if (!fs::is_directory(base, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("'", root, "' is not a folder"));
  }
  if (fs::is_regular_file(base / kTaskFileName, ec)) return std::vector<std::string>{root};
  std::vector<std::string> dirs;
  fs::recursive_directory_iterator it(base, fs::directory_options::skip_permission_denied, ec);
  if (ec) return absl::UnknownError(absl::StrCat("cannot list '", root, "': ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return absl::UnknownError(absl::StrCat("cannot list '", root, "': ", ec.message()));
    if (!it->is_directory(ec)) continue;
    if (fs::is_regular_file(it->path() / kTaskFileName, ec)) {
      dirs.push_back(it->path().string());
      it.disable_recursion_pending();
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace kevo::task
